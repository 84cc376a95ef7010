/**
 * Store calls the engine can stop waiting for. A `close` with a deadline must
 * return by that deadline even when a store call hangs (a database that
 * stopped answering, a lock held elsewhere): each call gets an AbortSignal,
 * which the store may honour, and the engine races the call against it, so
 * it stops waiting the moment the signal aborts whether the store honours it
 * or not.
 */
import { setMaxListeners } from 'node:events';
import { ClosedError } from '../errors.js';
import type { ScheduleRecord } from './schedules/types.js';
import type { AckAndClaimed, ClaimRequest, Claimed, CloseOptions, KillOptions, PurgePolicy, StartFrom, Store, StoreStats, StoredMessage } from './types.js';

/** A controller whose signal may carry many listeners at once (one per store call in flight) without Node's leak warning. */
export function stopController(): AbortController {
  const ctl = new AbortController();
  setMaxListeners(0, ctl.signal);
  return ctl;
}

/**
 * Aborts `stop` when one close call's deadline passes (`opts.timeoutMs`, else
 * `defaultMs`) or its `opts.signal` aborts, unless `done` (the close) settles
 * first. Every call of `close` arms its own, so the earliest deadline of all
 * the calls made wins, whichever call came first.
 */
export function armCloseDeadline(stop: AbortController, opts: CloseOptions, defaultMs: number, done: Promise<unknown>): void {
  if (stop.signal.aborted) return;
  const timer = setTimeout(() => stop.abort(new ClosedError('close deadline passed')), opts.timeoutMs ?? defaultMs);
  const signal = opts.signal;
  const onAbort = () => stop.abort(new ClosedError('close was aborted by its signal', { cause: signal?.reason }));
  let off: (() => void) | undefined;
  if (signal?.aborted) onAbort();
  else if (signal) off = whenAborted(signal, onAbort);
  const clear = () => {
    clearTimeout(timer);
    off?.();
  };
  done.then(clear, clear);
}

/** The error a call cut short by `signal` rejects with. */
function stopped(signal: AbortSignal): unknown {
  const r: unknown = signal.reason;
  return r instanceof ClosedError ? r : new ClosedError('the queue or subscription closed before the store answered', { cause: r });
}

/**
 * The calls racing each signal: one 'abort' listener per signal calls them
 * all, where a listener added and removed per call cost about as much as
 * a SQLite publish's own JavaScript (EventTarget bookkeeping on every store
 * call).
 */
const racing = new WeakMap<AbortSignal, Set<() => void>>();

function racers(signal: AbortSignal): Set<() => void> {
  const known = racing.get(signal);
  if (known !== undefined) return known;
  const calls = new Set<() => void>();
  racing.set(signal, calls);
  signal.addEventListener('abort', () => calls.forEach((onAbort) => onAbort()), { once: true });
  return calls;
}

/**
 * Calls `fn` when `signal` aborts, through the one listener this module keeps
 * per signal: many closes at once with one shutdown signal (a subscription's
 * each) add no listener of their own, so Node's "possible EventTarget memory
 * leak" warning does not fire at the eleventh. Returns the call that forgets
 * `fn`. `signal` must not have aborted yet.
 */
export function whenAborted(signal: AbortSignal, fn: () => void): () => void {
  const calls = racers(signal);
  calls.add(fn);
  return () => void calls.delete(fn);
}

/**
 * Settles like `p`, or rejects with a `ClosedError` as soon as `signal`
 * aborts, whichever comes first. A late rejection of `p` is swallowed.
 */
export function raceSignal<T>(signal: AbortSignal, p: Promise<T>): Promise<T> {
  if (signal.aborted) {
    p.catch(() => undefined);
    return Promise.reject(stopped(signal));
  }
  const calls = racers(signal);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(stopped(signal));
    calls.add(onAbort);
    p.then(
      (v) => {
        calls.delete(onAbort);
        resolve(v);
      },
      (err) => {
        calls.delete(onAbort);
        reject(err);
      },
    );
  });
}

/** Resolves true once `p` settles, false if `signal` aborts first (or already has). Never rejects. */
export async function settledBefore(p: Promise<unknown>, signal: AbortSignal): Promise<boolean> {
  try {
    await raceSignal(signal, p.then(() => undefined, () => undefined));
    return true;
  } catch {
    return false;
  }
}

/** Runs `call` with `signal`, and rejects as soon as the signal aborts. */
function guard<T>(signal: AbortSignal, call: () => Promise<T>): Promise<T> {
  if (signal.aborted) return Promise.reject(stopped(signal));
  let p: Promise<T>;
  try {
    p = call();
  } catch (err) {
    return Promise.reject(err);
  }
  return raceSignal(signal, p);
}

/**
 * The I/O calls of a `Store`, each given `signal` and cut short when it
 * aborts. What the engine's parts hold instead of the store itself.
 */
export class GuardedStore {
  readonly #s: Store;
  readonly signal: AbortSignal;

  constructor(store: Store, signal: AbortSignal) {
    this.#s = store;
    this.signal = signal;
  }

  /** The store behind the guard, for its optional methods. */
  get inner(): Store {
    return this.#s;
  }

  ensureGroup(topic: string, group: string, startFrom: StartFrom): Promise<void> {
    return guard(this.signal, () => this.#s.ensureGroup(topic, group, startFrom, this.signal));
  }
  append(msgs: StoredMessage[]): Promise<void> {
    return guard(this.signal, () => this.#s.append(msgs, this.signal));
  }
  /** The store's `appendNow`; only when `inner.appendNow` exists. Throws `ClosedError` once the signal aborted, without calling it. */
  appendNow(msgs: StoredMessage[]): void {
    if (this.signal.aborted) throw stopped(this.signal);
    this.#s.appendNow!(msgs);
  }
  claim(req: ClaimRequest): Promise<Claimed[]> {
    return guard(this.signal, () => this.#s.claim(req, this.signal));
  }
  ack(cs: Claimed[]): Promise<string[]> {
    return guard(this.signal, () => this.#s.ack(cs, this.signal));
  }
  /** The store's `ackAndClaim`; only when `inner.ackAndClaim` exists. */
  ackAndClaim(acks: Claimed[], req: ClaimRequest): Promise<AckAndClaimed> {
    return guard(this.signal, () => this.#s.ackAndClaim!(acks, req, this.signal));
  }
  retry(c: Claimed, backoffMs: number, lastError: string): Promise<boolean> {
    return guard(this.signal, () => this.#s.retry(c, backoffMs, lastError, this.signal));
  }
  kill(c: Claimed, lastError: string, opts?: KillOptions): Promise<boolean> {
    return guard(this.signal, () => this.#s.kill(c, lastError, opts, this.signal));
  }
  extend(cs: Claimed[], leaseMs: number): Promise<string[]> {
    return guard(this.signal, () => this.#s.extend(cs, leaseMs, this.signal));
  }
  release(cs: Claimed[]): Promise<void> {
    return guard(this.signal, () => this.#s.release(cs, this.signal));
  }
  purge(policy: PurgePolicy, batch: number): Promise<number> {
    return guard(this.signal, () => this.#s.purge(policy, batch, this.signal));
  }
  stats(topic: string, group: string): Promise<StoreStats> {
    return guard(this.signal, () => this.#s.stats(topic, group, this.signal));
  }
  /** The store's `setGroupPaused`; only when `inner.setGroupPaused` exists. */
  setGroupPaused(topic: string, group: string, paused: boolean): Promise<boolean> {
    return guard(this.signal, () => this.#s.setGroupPaused!(topic, group, paused, this.signal));
  }
  ping(): Promise<void> {
    return guard(this.signal, () => this.#s.ping(this.signal));
  }
  acquireJanitor(holder: string, ttlMs: number): Promise<boolean> {
    return guard(this.signal, () => this.#s.acquireJanitor!(holder, ttlMs));
  }
  /** The schedule methods below: only when the store has them (`hasSchedules`). */
  putSchedule(s: ScheduleRecord): Promise<boolean> {
    return guard(this.signal, () => this.#s.putSchedule!(s, this.signal));
  }
  deleteSchedule(name: string): Promise<boolean> {
    return guard(this.signal, () => this.#s.deleteSchedule!(name, this.signal));
  }
  listSchedules(): Promise<ScheduleRecord[]> {
    return guard(this.signal, () => this.#s.listSchedules!(this.signal));
  }
  advanceSchedule(name: string, revision: string, tick: Date): Promise<boolean> {
    return guard(this.signal, () => this.#s.advanceSchedule!(name, revision, tick, this.signal));
  }
}
