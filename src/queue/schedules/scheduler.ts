/**
 * The loop that fires schedules: one per queue whose store keeps schedules
 * (unless `fireSchedules` is off). Every such queue runs one, and there is
 * no leader: each round reads the stored schedules, publishes the ticks
 * that are due (plan.ts) and records them with `advanceSchedule`. Instances
 * firing the same tick publish the same message ID, which the store keeps
 * once; that is what makes a tick fire once however many instances run.
 *
 * A round publishes before it records. An instance that dies between the
 * two leaves the tick unrecorded, and whoever looks next publishes it again,
 * which stores nothing new: a crash never loses a tick. Recording never
 * moves a schedule back, and never touches one whose options changed since
 * the round read it (the revision is compared).
 *
 * The loop sleeps until the earliest next tick of the schedules it knows,
 * or `refreshMs` at most, so it learns of schedules added elsewhere; with no
 * schedules a round is one `listSchedules` call every `refreshMs`. Its timer
 * keeps the process running only while there are schedules to fire. A
 * failed round is reported (op `schedules`) and tried again after
 * `retryMs`. When no round succeeded for longer than `refreshMs + stallMs`
 * (the store was unreachable, the process was suspended, the clock jumped),
 * the instance counts as having stopped watching: the ticks it did not
 * publish in that time were missed, and `catchUp` decides about them.
 */
import type { GuardedStore } from '../abortable.js';
import { settledBefore } from '../abortable.js';
import type { ErrorReporter } from '../options.js';
import type { StoredMessage } from '../types.js';
import type { ScheduleClock } from './clock.js';
import { planTicks } from './plan.js';
import { tickMessage } from './tick-message.js';
import { ticksOf } from './ticks.js';
import type { Ticks } from './ticks.js';
import type { ScheduleRecord } from './types.js';

/** Longest sleep between two reads of the stored schedules, ms. */
export const SCHEDULE_REFRESH_MS = 10_000;
/** How much later than due a round may run before the instance counts as having stopped watching, ms (on top of `refreshMs`). */
export const SCHEDULE_STALL_MS = 60_000;
/** Wait before a failed round is tried again, ms. */
const RETRY_MS = 1000;

/** The scheduler's timings. @internal */
export interface SchedulerTimings {
  refreshMs: number;
  stallMs: number;
}

/** What the scheduler needs from its queue. @internal */
export interface SchedulerHost {
  /** The queue's store, its calls cut short when close's deadline passes. */
  store: GuardedStore;
  /** Publishes tick messages as the queue does (group commit, wakes its subscriptions). */
  publish(msgs: StoredMessage[]): Promise<void>;
  clock: ScheduleClock;
  onError: ErrorReporter;
}

/** What this instance knows of one schedule between rounds. */
interface Watch {
  revision: string;
  /** Undefined when the stored spec cannot be read (written by another version, say): reported once, then passed over. */
  ticks: Ticks | undefined;
  /** The `now` of the last round that published this revision: every tick up to it is settled here. */
  through: number | undefined;
}

/** Fires the stored schedules of one queue. @internal */
export class Scheduler {
  readonly #host: SchedulerHost;
  readonly #timings: SchedulerTimings;
  readonly #watches = new Map<string, Watch>();
  #awakeSince: number;
  #lastOk: number;
  #timer: { cancel(): void } | undefined;
  #running: Promise<void> | undefined;
  /** A wake-up came while a round ran: run another at once. */
  #again = false;
  #stopped = false;

  constructor(host: SchedulerHost, timings: SchedulerTimings = { refreshMs: SCHEDULE_REFRESH_MS, stallMs: SCHEDULE_STALL_MS }) {
    this.#host = host;
    this.#timings = timings;
    this.#awakeSince = this.#lastOk = host.clock.now();
  }

  /** Starts watching: the first round runs at once. */
  start(): void {
    this.wake();
  }

  /** Runs a round now (after the one running, if any): the stored schedules changed. */
  wake(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#running = this.#round().finally(() => {
      this.#running = undefined;
      if (this.#again) {
        this.#again = false;
        this.wake();
      }
    });
  }

  /** Stops the loop and waits for a round in flight, until `signal` aborts (its store calls are cut short then too). */
  async stop(signal: AbortSignal): Promise<void> {
    this.#stopped = true;
    this.#timer?.cancel();
    this.#timer = undefined;
    if (this.#running) await settledBefore(this.#running, signal);
  }

  async #round(): Promise<void> {
    const { clock, store } = this.#host;
    const now = clock.now();
    if (now - this.#lastOk > this.#timings.refreshMs + this.#timings.stallMs) this.#awakeSince = now;
    let records: ScheduleRecord[];
    try {
      records = await store.listSchedules();
      const fired = this.#plan(records, now);
      const msgs = fired.flatMap(({ r, ticks }) => ticks.map((t) => tickMessage(r, t, now)));
      if (msgs.length > 0) await this.#host.publish(msgs);
      for (const r of records) this.#watches.get(r.name)!.through = now;
      this.#lastOk = now;
      await Promise.all(fired.map(({ r, ticks }) => this.#record(r, ticks[ticks.length - 1]!)));
    } catch (err) {
      if (!this.#stopped) this.#host.onError(err, 'schedules');
      this.#sleep(RETRY_MS);
      return;
    }
    this.#sleepUntilNextTick(now);
  }

  /** Brings the watches in line with `records` and returns, per schedule with due ticks, the ticks to publish. */
  #plan(records: ScheduleRecord[], now: number): Array<{ r: ScheduleRecord; ticks: number[] }> {
    const names = new Set(records.map((r) => r.name));
    for (const name of this.#watches.keys()) if (!names.has(name)) this.#watches.delete(name);
    const fired: Array<{ r: ScheduleRecord; ticks: number[] }> = [];
    for (const r of records) {
      let w = this.#watches.get(r.name);
      if (w?.revision !== r.revision) {
        w = { revision: r.revision, ticks: this.#ticksOf(r), through: undefined };
        this.#watches.set(r.name, w);
      }
      if (w.ticks === undefined) continue;
      const ticks = planTicks(r, w.ticks, w.through, this.#awakeSince, now);
      if (ticks.length > 0) fired.push({ r, ticks });
    }
    return fired;
  }

  #ticksOf(r: ScheduleRecord): Ticks | undefined {
    try {
      return ticksOf(r.spec);
    } catch (err) {
      this.#host.onError(err, `schedule ${r.name}`);
      return undefined;
    }
  }

  /** Records that `r`'s ticks up to `tick` were published; forgets `r` when its revision is no longer stored. */
  async #record(r: ScheduleRecord, tick: number): Promise<void> {
    try {
      if (!(await this.#host.store.advanceSchedule(r.name, r.revision, new Date(tick)))) this.#watches.delete(r.name);
    } catch (err) {
      // Published but not recorded: whoever looks next publishes it again, which stores nothing new.
      if (!this.#stopped) this.#host.onError(err, 'schedules');
    }
  }

  #sleepUntilNextTick(now: number): void {
    let at = now + this.#timings.refreshMs;
    for (const w of this.#watches.values()) {
      const next = w.ticks?.next(Math.max(w.through ?? now, now));
      if (next !== undefined && next < at) at = next;
    }
    this.#sleep(at - now);
  }

  #sleep(ms: number): void {
    if (this.#stopped) return;
    this.#timer = this.#host.clock.setTimer(() => {
      this.#timer = undefined;
      this.wake();
    }, ms, this.#watches.size > 0);
  }
}
