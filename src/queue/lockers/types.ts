/**
 * The distributed locker SPI (Bifrost's `DistributedLocker`): a mutual
 * exclusion lock per string key, shared by every instance that uses the same
 * locker backend, with a time to live so a crashed holder cannot block the
 * key forever.
 *
 * A store that has no row locks or transactions (the ClickHouse store)
 * serialises its read-then-write operations through one. Three
 * implementations ship: `ProcessLocker` (one process), `PostgresLocker`
 * (advisory locks) and `RedisLocker` (`SET NX PX` with a token).
 */

/** Options of `DistributedLocker.acquire`. */
export interface AcquireOptions {
  /** Stop waiting for the lock when this aborts; `acquire` then rejects with `LockedError` (cause: the signal's reason). */
  signal?: AbortSignal;
}

/**
 * A held lock. `fence` is the fencing token of this acquisition: it grows with
 * every acquisition of the same key (a later holder always has a larger one),
 * so a write that carries it can be told apart from a stale holder's.
 */
export interface HeldLock {
  /** The key this lock is on. */
  readonly key: string;
  /** Fencing token: a positive integer, larger than that of every earlier acquisition of `key`. */
  readonly fence: number;
  /**
   * Milliseconds on this process's monotonic clock (`performance.now()`)
   * after which the lock may be held by someone else: the time of the request
   * plus `ttlMs`. A holder checks it before each write it makes under the lock.
   */
  readonly expiresAt: number;
  /**
   * Gives the lock up. Idempotent; after the TTL has passed it changes
   * nothing (a newer holder keeps the key). Rejects with `IOError` when the
   * backend cannot be reached (the lock then lapses at its TTL).
   */
  release(): Promise<void>;
}

/**
 * Mutual exclusion per key across every instance sharing the backend.
 * Bifrost's `DistributedLocker`.
 */
export interface DistributedLocker {
  /**
   * Waits until `key` is free, takes it for at most `ttlMs` milliseconds, and
   * resolves with the held lock. Concurrent calls for one key are granted one
   * at a time; calls for different keys do not wait for each other.
   *
   * @throws InvalidArgumentError `key` is empty or holds NUL, or `ttlMs` is not an integer from 1 to 2³¹−1 (the longest Node timer).
   * @throws LockedError `signal` aborted while the key was still held by someone else (cause: the signal's reason).
   * @throws IOError the backend cannot be reached.
   */
  acquire(key: string, ttlMs: number, opts?: AcquireOptions): Promise<HeldLock>;
}
