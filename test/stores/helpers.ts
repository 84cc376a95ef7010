/** Shared helpers of the conformance suite. */
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach } from 'node:test';
import type { StoreFactory, StoreHarness } from './factories.js';
import type { ClaimRequest, Claimed, ConsumerGroup, KillOptions, MessagePage, PurgePolicy, StartFrom, Store, StoreStats, StoredMessage } from '../../src/queue/types.js';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The least time a wait of a test gives before calling the thing it waits
 * for hung. A loaded 2-core machine runs a test many times slower than an
 * idle one, so a deadline is a hang detector, never a speed check: a test
 * that must tell a wake-up from a poll polls far less often than this (an
 * hour, see `HOUR_POLL`).
 */
export const HANG_MS = 120_000;

/** A poll interval no wait of a test reaches: a delivery seen in a test came from a wake-up. */
export const HOUR_POLL = 3_600_000;

/**
 * Polls `cond` every 10 ms until it is true; throws when it has not become
 * true after `timeoutMs`, or `HANG_MS` if that is longer (the deadline means
 * "hung", not "slow").
 */
export async function waitFor(cond: () => boolean | Promise<boolean>, timeoutMs = 5000, what = 'condition'): Promise<void> {
  const limit = Math.max(timeoutMs, HANG_MS);
  const end = Date.now() + limit;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`waited ${limit} ms for ${what}: hung`);
    await sleep(10);
  }
}

/** `p`, or a rejection saying `what` hung when it has not settled after `HANG_MS`. */
export async function orHang<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`waited ${HANG_MS} ms for ${what}: hung`)), HANG_MS);
  });
  try {
    return await Promise.race([p, hung]);
  } finally {
    clearTimeout(timer);
  }
}

/** A message ready for `Store.append`. */
/** The three counts of a `QueueStats`, for comparing without its time-dependent `oldestPendingAgeMs`. */
export function counts(s: StoreStats): { pending: number; leased: number; dead: number } {
  return { pending: s.pending, leased: s.leased, dead: s.dead };
}

export function msg(topic: string, extra: Partial<StoredMessage> = {}): StoredMessage {
  return { id: randomUUID(), topic, payload: new TextEncoder().encode(`p-${topic}`), publishedAt: new Date(), ...extra };
}

export function claimReq(topic: string, group: string, extra: Partial<ClaimRequest> = {}): ClaimRequest {
  return { topic, group, runnerId: 'test', max: 100, leaseMs: 60_000, maxInFlight: 0, ...extra };
}

export const ids = (cs: Claimed[]) => cs.map((c) => c.message.id);

/** A promise with its resolver outside. */
export function deferred<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

type Op = keyof Omit<Store, 'appendNow' | 'listen' | 'canConsume' | 'acquireJanitor' | 'duePairs' | 'setGroupPaused' | 'capabilities'> | 'acquireJanitor' | 'duePairs' | 'setGroupPaused';

/**
 * Wraps a store, counting calls and letting a test inject faults: `before[op]`
 * runs first and may throw or wait; `after[op]` may replace the result.
 */
export class InstrumentedStore implements Store {
  readonly calls: Record<string, number> = {};
  readonly claimMax: number[] = [];
  readonly ackBatches: number[] = [];
  readonly ackTokens: string[] = [];
  readonly before: Partial<Record<Op, (...args: any[]) => unknown>> = {};
  readonly after: Partial<Record<Op, (result: any, ...args: any[]) => unknown>> = {};
  readonly listen?: Store['listen'];
  /** Present when the inner store has it (the engine's poller then asks it, else wakes every subscription each tick). */
  readonly duePairs?: Store['duePairs'];
  /** Present when the inner store has it, as are its `capabilities`. */
  readonly setGroupPaused?: Store['setGroupPaused'];
  readonly capabilities?: Store['capabilities'];
  /**
   * Present when the inner store has it, counted as an `append`: its
   * `before.append` must then be synchronous (a promise it returns is
   * refused with an error; hide `appendNow` to test a slow append).
   */
  readonly appendNow?: Store['appendNow'];

  constructor(readonly inner: Store) {
    if (inner.appendNow) {
      this.appendNow = (msgs) => {
        this.calls.append = (this.calls.append ?? 0) + 1;
        const waited = this.before.append?.(msgs);
        if (waited instanceof Promise) throw new Error('before.append returned a promise to appendNow: hide appendNow for this test');
        inner.appendNow!(msgs);
      };
    }
    if (inner.listen) this.listen = (signal, wake) => inner.listen!(signal, wake);
    if (inner.duePairs) this.duePairs = (pairs, signal) => this.#call('duePairs', [pairs, signal], () => inner.duePairs!(pairs, signal));
    if (inner.setGroupPaused) {
      this.setGroupPaused = (topic, group, paused) => this.#call('setGroupPaused', [topic, group, paused], () => inner.setGroupPaused!(topic, group, paused));
    }
    if (inner.capabilities) this.capabilities = inner.capabilities;
  }

  async #call<T>(op: Op, args: unknown[], run: () => Promise<T>): Promise<T> {
    this.calls[op] = (this.calls[op] ?? 0) + 1;
    await this.before[op]?.(...args);
    const r = await run();
    const f = this.after[op];
    return f ? ((await f(r, ...args)) as T) : r;
  }

  count(op: Op): number {
    return this.calls[op] ?? 0;
  }

  ensureGroup(topic: string, group: string, s: StartFrom) {
    return this.#call('ensureGroup', [topic, group, s], () => this.inner.ensureGroup(topic, group, s));
  }
  append(msgs: StoredMessage[]) {
    return this.#call('append', [msgs], () => this.inner.append(msgs));
  }
  claim(req: ClaimRequest) {
    this.claimMax.push(req.max);
    return this.#call('claim', [req], () => this.inner.claim(req));
  }
  ack(cs: Claimed[]) {
    this.ackBatches.push(cs.length);
    this.ackTokens.push(...cs.map((c) => c.claimToken));
    return this.#call('ack', [cs], () => this.inner.ack(cs));
  }
  retry(c: Claimed, backoffMs: number, e: string) {
    return this.#call('retry', [c, backoffMs, e], () => this.inner.retry(c, backoffMs, e));
  }
  kill(c: Claimed, e: string, opts?: KillOptions) {
    return this.#call('kill', [c, e, opts], () => this.inner.kill(c, e, opts));
  }
  extend(cs: Claimed[], leaseMs: number) {
    return this.#call('extend', [cs, leaseMs], () => this.inner.extend(cs, leaseMs));
  }
  release(cs: Claimed[]) {
    return this.#call('release', [cs], () => this.inner.release(cs));
  }
  purge(p: PurgePolicy, batch: number) {
    return this.#call('purge', [p, batch], () => this.inner.purge(p, batch));
  }
  stats(topic: string, group: string): Promise<StoreStats> {
    return this.#call('stats', [topic, group], () => this.inner.stats(topic, group));
  }
  ping() {
    return this.#call('ping', [], () => this.inner.ping());
  }
  removeGroup(topic: string, group: string): Promise<boolean> {
    return this.#call('removeGroup', [topic, group], () => this.inner.removeGroup!(topic, group));
  }
  listGroups(topic?: string): Promise<ConsumerGroup[]> {
    return this.#call('listGroups', [topic], () => this.inner.listGroups!(topic));
  }
  listMessages(topic: string, page: { after?: string; limit: number }): Promise<MessagePage> {
    return this.#call('listMessages', [topic, page], () => this.inner.listMessages!(topic, page));
  }
  close() {
    return this.#call('close', [], () => this.inner.close());
  }
  acquireJanitor(holder: string, ttlMs: number) {
    return this.#call('acquireJanitor', [holder, ttlMs], () => this.inner.acquireJanitor!(holder, ttlMs));
  }
}

/** Resolves as `p` does, or rejects naming `what` once `hangMs` pass: a hang catcher, not a speed check. */
export async function within<T>(p: Promise<T>, what: string, hangMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: still pending after ${hangMs} ms`)), hangMs)));
  try {
    return await Promise.race([p, hang]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Call inside a `describe`: a fresh harness of `factory` for every test,
 * cleaned up after it (after `beforeCleanup`, e.g. closing the test's
 * queues). Read `h` inside a test or a later hook.
 */
export function harnessPerTest(factory: StoreFactory, beforeCleanup: () => Promise<unknown> = async () => undefined): { readonly h: StoreHarness } {
  let h: StoreHarness;
  beforeEach(async () => {
    h = await factory.create();
  });
  afterEach(async () => {
    await beforeCleanup();
    await h.cleanup();
  });
  return {
    get h() {
      return h;
    },
  };
}
