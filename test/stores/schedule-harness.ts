/**
 * Set-up of the engine-level schedule suites: queues over a store harness
 * whose schedulers run on a fake clock, and waits that end when every
 * scheduler has finished its round (a finished round has set its timer).
 */
import { beforeEach } from 'node:test';
import { StoreQueue } from '../../src/queue/engine.js';
import type { EngineConfig } from '../../src/queue/options.js';
import type { SchedulerTimings } from '../../src/queue/schedules/scheduler.js';
import { HEADER_SCHEDULE_TICK } from '../../src/queue/schedules/tick-message.js';
import type { StoredMessage } from '../../src/queue/types.js';
import { FakeClock } from '../helpers/fake-clock.js';
import type { StoreFactory, StoreHarness } from './factories.js';
import { HANG_MS, harnessPerTest, sleep } from './helpers.js';

export interface ScheduleHarness {
  readonly h: StoreHarness;
  /** Errors the queues of the running test reported. */
  readonly errors: Array<{ op: string; err: unknown }>;
  /** A queue over a new handle on the test's data, its scheduler on `clock`; resolves once its first round is done. */
  instance(clock: FakeClock, cfg?: EngineConfig, timings?: SchedulerTimings): Promise<StoreQueue>;
  /** Resolves once `clock` has `timers` pending (every scheduler on it between rounds). */
  settle(clock: FakeClock, timers?: number): Promise<void>;
  /** Sets `clock` to `at` and waits for the rounds that fired. */
  step(clock: FakeClock, at: number, timers?: number): Promise<void>;
  /** Every message retained on `topic`, in publish order. */
  messages(q: StoreQueue, topic: string): Promise<StoredMessage[]>;
  /** The tick headers of the messages on `topic`, sorted. */
  ticks(q: StoreQueue, topic: string): Promise<string[]>;
}

/** Call inside a `describe`: a fresh store harness per test, its queues closed afterwards. */
export function scheduleHarness(factory: StoreFactory): ScheduleHarness {
  let queues: StoreQueue[] = [];
  /** The queues whose schedulers run: one timer each between rounds. */
  let firing: StoreQueue[] = [];
  let errors: Array<{ op: string; err: unknown }> = [];
  const harness = harnessPerTest(factory, () => Promise.allSettled(queues.map((q) => q.close({ timeoutMs: 100 }))));
  beforeEach(() => {
    queues = [];
    firing = [];
    errors = [];
  });
  const settle = async (clock: FakeClock, timers = firing.filter((q) => !closed.has(q)).length) => {
    const end = Date.now() + HANG_MS;
    for (let i = 0; clock.pending < timers; i++) {
      if (Date.now() > end) throw new Error(`waited ${HANG_MS} ms for ${timers} schedulers to finish their rounds: hung`);
      if (i % 50 === 49) await sleep(2);
      else await new Promise<void>((resolve) => setImmediate(resolve));
    }
  };
  const closed = new WeakSet<StoreQueue>();
  const messages = async (q: StoreQueue, topic: string) => {
    const out: StoredMessage[] = [];
    let after: string | undefined;
    do {
      const page = await q.listMessages(topic, after === undefined ? { limit: 1000 } : { after, limit: 1000 });
      out.push(...page.messages);
      after = page.next;
    } while (after !== undefined);
    return out;
  };
  return {
    get h() {
      return harness.h;
    },
    get errors() {
      return errors;
    },
    async instance(clock, cfg = {}, timings) {
      const q = new StoreQueue(await harness.h.open(), { onError: (err, op) => errors.push({ op, err }), ...cfg }, timings ? { clock, scheduleTimings: timings } : { clock });
      const close = q.close.bind(q);
      q.close = (opts) => (closed.add(q), close(opts));
      queues.push(q);
      if (cfg.fireSchedules !== false) {
        firing.push(q);
        await settle(clock);
      }
      return q;
    },
    settle,
    async step(clock, at, timers) {
      clock.set(at);
      await settle(clock, timers);
    },
    messages,
    async ticks(q, topic) {
      return (await messages(q, topic)).map((m) => m.headers?.[HEADER_SCHEDULE_TICK] ?? '?').sort();
    },
  };
}
