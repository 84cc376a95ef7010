/**
 * `ProcessLocker`: the distributed-locker SPI inside one process (Bifrost's
 * `NewProcessLocker`). It serialises the callers of one locker object and
 * nothing else, so it is right for a single instance and for tests; instances
 * that share a store need `PostgresLocker` or `RedisLocker`.
 */
import { performance } from 'node:perf_hooks';
import { abortedWait, checkAcquire } from './checks.js';
import type { AcquireOptions, DistributedLocker, HeldLock } from './types.js';

interface Waiter {
  ttlMs: number;
  grant: (lock: HeldLock) => void;
}

interface KeyState {
  /** The current holder's fence; 0 while free. */
  held: number;
  timer: NodeJS.Timeout | undefined;
  queue: Waiter[];
}

/**
 * A `DistributedLocker` local to this object. Waiters for one key are granted
 * in arrival order. A hold ends at `release()` or when its TTL passes,
 * whichever comes first; fences count up per key from 1.
 */
export class ProcessLocker implements DistributedLocker {
  readonly #keys = new Map<string, KeyState>();
  readonly #fences = new Map<string, number>();

  /**
   * Resolves once `key` is free, holding it for at most `ttlMs`.
   * @throws InvalidArgumentError empty key, a key with NUL, or a `ttlMs` that is not an integer from 1 to 2³¹−1.
   * @throws LockedError `opts.signal` aborted before the key was granted.
   */
  acquire(key: string, ttlMs: number, opts: AcquireOptions = {}): Promise<HeldLock> {
    try {
      checkAcquire(key, ttlMs);
    } catch (err) {
      return Promise.reject(err);
    }
    const signal = opts.signal;
    if (signal?.aborted) return Promise.reject(abortedWait(key, signal));
    let st = this.#keys.get(key);
    if (!st) this.#keys.set(key, (st = { held: 0, timer: undefined, queue: [] }));
    if (st.held === 0) return Promise.resolve(this.#grant(key, st, ttlMs));
    return new Promise<HeldLock>((resolve, reject) => {
      const w: Waiter = {
        ttlMs,
        grant: (lock) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(lock);
        },
      };
      const queue = st.queue;
      function onAbort() {
        const i = queue.indexOf(w);
        if (i >= 0) queue.splice(i, 1);
        reject(abortedWait(key, signal!));
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      queue.push(w);
      // Someone waits for the TTL now: it must keep the process alive.
      st.timer?.ref();
    });
  }

  #grant(key: string, st: KeyState, ttlMs: number): HeldLock {
    const fence = (this.#fences.get(key) ?? 0) + 1;
    this.#fences.set(key, fence);
    st.held = fence;
    const expiresAt = performance.now() + ttlMs;
    st.timer = setTimeout(() => this.#free(key, fence), ttlMs);
    // A hold nobody waits for does not keep the process alive.
    if (st.queue.length === 0) st.timer.unref();
    return {
      key,
      fence,
      expiresAt,
      release: async () => this.#free(key, fence),
    };
  }

  /** Ends hold `fence` of `key` if it is still the current one, and hands the key to the next waiter. */
  #free(key: string, fence: number): void {
    const st = this.#keys.get(key);
    if (!st || st.held !== fence) return;
    clearTimeout(st.timer);
    st.held = 0;
    st.timer = undefined;
    const next = st.queue.shift();
    if (next) next.grant(this.#grant(key, st, next.ttlMs));
    else this.#keys.delete(key);
  }
}
