/** Argument checks, the retry wait and the close signal shared by the lockers. */
import { setMaxListeners } from 'node:events';
import { InvalidArgumentError, LockedError } from '../../errors.js';
import { MAX_TIMER_MS } from '../options.js';
import { shown } from '../../show-value.js';

/**
 * Throws `InvalidArgumentError` unless `key` is a non-empty string without NUL and
 * `ttlMs` an integer from 1 to `MAX_TIMER_MS`: a lock's expiry runs on a
 * Node timer, and a longer delay fires after 1 ms, freeing the key at once.
 */
export function checkAcquire(key: unknown, ttlMs: unknown): void {
  // NUL is refused by every locker alike: Postgres text cannot hold it.
  if (typeof key !== 'string' || key === '' || key.includes('\0')) throw new InvalidArgumentError('locker: key must be a non-empty string without NUL');
  if (typeof ttlMs !== 'number' || !Number.isInteger(ttlMs) || ttlMs < 1 || ttlMs > MAX_TIMER_MS) {
    throw new InvalidArgumentError(`locker: ttlMs must be an integer from 1 to ${MAX_TIMER_MS}, got ${shown(ttlMs)}`);
  }
}

/** The `LockedError` an aborted wait rejects with. */
export function abortedWait(key: string, signal: AbortSignal): LockedError {
  return new LockedError(`locker: gave up waiting for ${JSON.stringify(key)}`, { cause: signal.reason });
}

/**
 * Sleeps `ms`, or less when `signal` aborts (then rejects with `LockedError`).
 * Used between attempts to take a key another holder has.
 */
export function pause(ms: number, key: string, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(abortedWait(key, signal));
  return new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    function onAbort() {
      clearTimeout(t);
      reject(abortedWait(key, signal!));
    }
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Delay before the next attempt at a held key: doubling from 2 ms up to 50 ms, with jitter so waiters spread out. */
export function retryDelay(attempt: number): number {
  const d = Math.min(50, 2 * 2 ** Math.min(attempt, 5));
  return d / 2 + Math.random() * (d / 2);
}

/**
 * `taking` (a try at a key), or the error `why()` makes as soon as `signal`
 * aborts (a caller that gave up, a locker closing): the try may wait on a
 * connection or a server that does not answer. The try's result, should it
 * come after the abort, goes to `giveBack`, which gives a grant back at once.
 */
export function untilAborted<T>(taking: Promise<T>, signal: AbortSignal, why: () => Error, giveBack: (late: Promise<T>) => void): Promise<T> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      reject(why());
      giveBack(taking);
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    taking.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/**
 * `running`, or the error `timedOut()` makes once `ms` pass without an
 * answer (a server or network that stopped answering). An answer that comes
 * after the deadline goes to `onLate`, which gives a grant back. `ms` 0: no
 * deadline.
 */
export function withDeadline<T>(running: Promise<T>, ms: number, timedOut: () => Error, onLate?: (late: T) => void): Promise<T> {
  if (ms === 0) return running;
  let timer: NodeJS.Timeout | undefined;
  let late = false;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      late = true;
      reject(timedOut());
    }, ms);
  });
  running.then((v) => late && onLate?.(v), () => undefined);
  return Promise.race([running, deadline]).finally(() => clearTimeout(timer));
}

/** An `AbortController` whose signal takes a listener from every waiting `acquire`, however many: no leak warning past ten. */
export function closeController(): AbortController {
  const ctl = new AbortController();
  setMaxListeners(0, ctl.signal);
  return ctl;
}

/**
 * The calls of a locker still under way (tries, give-backs, releases), so
 * that its close can let them finish before it ends its connection.
 */
export class RunningCalls {
  readonly #running = new Set<Promise<unknown>>();

  /** `p`, counted until it settles. */
  track<R>(p: Promise<R>): Promise<R> {
    this.#running.add(p);
    const untrack = () => void this.#running.delete(p);
    p.then(untrack, untrack);
    return p;
  }

  /** Resolves once nothing runs: a call that finishes may start another (a late grant's give-back), which is waited for too. */
  async settled(): Promise<void> {
    while (this.#running.size > 0) await Promise.allSettled([...this.#running]);
  }
}
