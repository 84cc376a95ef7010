/**
 * The engine's side of `Queue.schedule`, `unschedule` and `listSchedules`:
 * options checked and turned into a record, the store's schedule methods
 * looked up, and the calls on one name ordered. Calls on one schedule name
 * in one queue run one at a time in call order, so `schedule` then
 * `unschedule` of a name, called together, leave it deleted; calls on
 * different names run at once. Across instances the store's atomic writes
 * order them. `close` waits for the calls already made before it closes the
 * store (`idle`).
 */
import { UnsupportedError } from '../../errors.js';
import type { GuardedStore } from '../abortable.js';
import { settledBefore } from '../abortable.js';
import { KeyedLock } from '../admin.js';
import { validateName } from '../names.js';
import type { Message, Store, StoredMessage } from '../types.js';
import type { ScheduleClock } from './clock.js';
import { scheduleInfo, scheduleRevision, scheduleTiming } from './spec.js';
import type { ScheduleInfo, ScheduleOptions, ScheduleRecord, ScheduleSpec } from './types.js';

const SCHEDULE_METHODS = ['putSchedule', 'deleteSchedule', 'listSchedules', 'advanceSchedule'] as const;

/** Whether `store` keeps schedules: it has all four schedule methods of the Store SPI. */
export function hasSchedules(store: Store): boolean {
  return SCHEDULE_METHODS.every((m) => typeof store[m] === 'function');
}

/** What the schedule operations need from their queue. @internal */
export interface ScheduleOpsHost {
  store: Store;
  guarded: GuardedStore;
  clock: ScheduleClock;
  /**
   * Checks a message as `publish` does and fills in its ID and publish time;
   * with `encode`, the payload goes through the queue's codec first.
   */
  prepare(m: Message<unknown>, now: number, encode: boolean): StoredMessage;
  /** The stored schedules changed: the local scheduler should look again. */
  changed(): void;
}

/** `Queue.schedule`, `unschedule` and `listSchedules` of one queue. @internal */
export class ScheduleOps {
  readonly #host: ScheduleOpsHost;
  readonly #lock = new KeyedLock();
  /** Calls under way, which close waits for. */
  readonly #calls = new Set<Promise<unknown>>();

  constructor(host: ScheduleOpsHost) {
    this.#host = host;
  }

  #require(): void {
    if (!hasSchedules(this.#host.store)) throw new UnsupportedError(`this queue's store does not keep schedules (it lacks ${SCHEDULE_METHODS.join(', ')})`);
  }

  /** Runs `task` after the earlier calls on `name`, tracked for `idle`. */
  async #run<R>(name: string, task: () => Promise<R>): Promise<R> {
    const p = this.#lock.run(name, task);
    this.#calls.add(p);
    try {
      return await p;
    } finally {
      this.#calls.delete(p);
    }
  }

  /** See `Queue.schedule`. */
  schedule(name: string, opts: ScheduleOptions<unknown>): Promise<boolean> {
    validateName('schedule', name);
    this.#require();
    const now = this.#host.clock.now();
    const timing = scheduleTiming(opts, now);
    const sample: Message<unknown> = { topic: opts.topic, payload: opts.payload ?? new Uint8Array(0) };
    if (opts.key !== undefined) sample.key = opts.key;
    if (opts.headers !== undefined) sample.headers = opts.headers;
    const m = this.#host.prepare(sample, now, opts.payload !== undefined);
    const spec: ScheduleSpec = { ...timing, topic: m.topic };
    if (m.key !== undefined) spec.key = m.key;
    if (m.headers !== undefined) spec.headers = { ...m.headers };
    const record: ScheduleRecord = { name, revision: scheduleRevision(spec, m.payload), spec, payload: m.payload, updatedAt: new Date(now) };
    return this.#run(name, async () => {
      const stored = await this.#host.guarded.putSchedule(record);
      if (stored) this.#host.changed();
      return stored;
    });
  }

  /** See `Queue.unschedule`. */
  unschedule(name: string): Promise<boolean> {
    validateName('schedule', name);
    this.#require();
    return this.#run(name, async () => {
      const existed = await this.#host.guarded.deleteSchedule(name);
      if (existed) this.#host.changed();
      return existed;
    });
  }

  /** See `Queue.listSchedules`. */
  async list(): Promise<ScheduleInfo[]> {
    this.#require();
    const p = this.#host.guarded.listSchedules();
    this.#calls.add(p);
    try {
      return (await p).map(scheduleInfo);
    } finally {
      this.#calls.delete(p);
    }
  }

  /** Resolves once every call made so far has settled, or when `signal` aborts. */
  async idle(signal: AbortSignal): Promise<void> {
    await settledBefore(Promise.allSettled([...this.#calls]), signal);
  }
}
