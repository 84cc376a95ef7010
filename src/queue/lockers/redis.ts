/**
 * `RedisLocker`: the distributed-locker SPI on one Redis server. A hold is a
 * key set with `SET key token NX PX ttl`, where the token is random per
 * acquisition; release deletes the key only while it still holds that token
 * (compare-and-delete in a Lua script), so a holder whose TTL lapsed can never
 * free a newer holder's lock. The fence is an `INCR` counter beside the key,
 * bumped in the same script that takes the lock.
 *
 * `ioredis` is loaded only when the locker opens its own connection (`url`);
 * pass an `ioredis` client as `client` to share one.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { asIOError, ClosedError, InvalidArgumentError, type IOErrorSource } from '../../errors.js';
import { checkAcquire, pause, retryDelay } from './checks.js';
import type { AcquireOptions, DistributedLocker, HeldLock } from './types.js';

/** Takes KEYS[1] for ARGV[2] ms with token ARGV[1]; returns the new fence from KEYS[2], or 0 when the key is held. */
const ACQUIRE = `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0`;

/** Deletes KEYS[1] only while it holds token ARGV[1]. */
const RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`;

/** Options of `RedisLocker`: a connection URL, or an `ioredis` client the caller owns. */
export interface RedisLockerOptions {
  /** `redis://host:port/db`: the locker opens its own `ioredis` connection and closes it in `close()`. */
  url?: string;
  /** An `ioredis` client to borrow instead; `close()` leaves it open. */
  client?: Redis;
  /** Prefix of the Redis keys the locker uses. Default `ferry:lock:`. */
  prefix?: string;
}

/** How client and server errors become `IOError`s (every one taken as transient). */
const SOURCE: IOErrorSource = { name: 'redis locker' };

/**
 * A `DistributedLocker` on Redis, shared by every process that uses the same
 * server and prefix. Waiting is polling with a jittered backoff (2–50 ms).
 * Use `RedisLocker.open`.
 */
export class RedisLocker implements DistributedLocker {
  readonly #client: Redis;
  readonly #owns: boolean;
  readonly #prefix: string;
  #closed = false;
  /** The first `close()`'s run, which every call returns. */
  #closing: Promise<void> | undefined;

  private constructor(client: Redis, owns: boolean, prefix: string) {
    this.#client = client;
    this.#owns = owns;
    this.#prefix = prefix;
  }

  /**
   * Connects (with `url`) or wraps `client`.
   * @throws InvalidArgumentError neither or both of `url` and `client`.
   * @throws IOError the server cannot be reached.
   */
  static async open(opts: RedisLockerOptions): Promise<RedisLocker> {
    const hasUrl = typeof opts?.url === 'string' && opts.url !== '';
    if (hasUrl === (opts?.client !== undefined)) throw new InvalidArgumentError('redis locker needs exactly one of url and client');
    const prefix = opts.prefix ?? 'ferry:lock:';
    if (opts.client) return new RedisLocker(opts.client, false, prefix);
    const mod = (await import('ioredis')) as unknown as { Redis: new (url: string, o: object) => Redis };
    const client = new mod.Redis(opts.url!, { lazyConnect: true, maxRetriesPerRequest: 2 });
    client.on('error', () => undefined);
    try {
      await client.connect();
    } catch (err) {
      client.disconnect();
      throw asIOError('connecting', err, SOURCE);
    }
    return new RedisLocker(client, true, prefix);
  }

  /**
   * Waits until `key` is free and takes it for `ttlMs`.
   * @throws InvalidArgumentError empty key, a key with NUL, or a `ttlMs` that is not an integer from 1 to 2³¹−1.
   * @throws LockedError `opts.signal` aborted while the key was held.
   * @throws ClosedError the locker was closed.
   * @throws IOError Redis failed.
   */
  async acquire(key: string, ttlMs: number, opts: AcquireOptions = {}): Promise<HeldLock> {
    checkAcquire(key, ttlMs);
    const redisKey = this.#prefix + key;
    const token = randomUUID();
    for (let attempt = 0; ; attempt++) {
      if (this.#closed) throw new ClosedError('redis locker is closed');
      if (opts.signal?.aborted) await pause(0, key, opts.signal);
      const startedAt = performance.now();
      let fence: number;
      try {
        fence = Number(await this.#client.eval(ACQUIRE, 2, redisKey, `${redisKey}:fence`, token, String(ttlMs)));
      } catch (err) {
        throw asIOError(`acquiring ${key}`, err, SOURCE);
      }
      if (fence > 0) return this.#held(key, redisKey, token, fence, startedAt + ttlMs);
      await pause(retryDelay(attempt), key, opts.signal);
    }
  }

  #held(key: string, redisKey: string, token: string, fence: number, expiresAt: number): HeldLock {
    let released = false;
    return {
      key,
      fence,
      expiresAt,
      release: async () => {
        if (released) return;
        released = true;
        if (performance.now() >= expiresAt) return;
        try {
          await this.#client.eval(RELEASE, 1, redisKey, token);
        } catch (err) {
          throw asIOError(`releasing ${key}`, err, SOURCE);
        }
      },
    };
  }

  /** Closes the connection the locker opened; a borrowed client stays open. Held locks lapse at their TTL. Idempotent: a call made while another runs resolves when that one does. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    if (this.#owns) await this.#client.quit().catch(() => this.#client.disconnect());
  }
}
