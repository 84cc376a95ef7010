/** Argument checks and the retry wait shared by the lockers. */
import { InvalidArgumentError, LockedError } from '../../errors.js';

/** Throws `InvalidArgumentError` unless `key` is a non-empty string and `ttlMs` a positive safe integer. */
export function checkAcquire(key: unknown, ttlMs: unknown): void {
  if (typeof key !== 'string' || key === '') throw new InvalidArgumentError('locker: key must be a non-empty string');
  if (typeof ttlMs !== 'number' || !Number.isSafeInteger(ttlMs) || ttlMs < 1) throw new InvalidArgumentError(`locker: ttlMs must be a positive integer, got ${String(ttlMs)}`);
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
