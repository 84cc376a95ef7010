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
import { asIOError, ClosedError, InvalidArgumentError, IOError, type IOErrorSource } from '../../errors.js';
import { knownKeys, rejectUnknownKeys } from '../../known-keys.js';
import { shown } from '../../show-value.js';
import { MAX_TIMER_MS } from '../options.js';
import { abortedWait, checkAcquire, closeController, pause, retryDelay, RunningCalls, untilAborted, withDeadline } from './checks.js';
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
  /**
   * Ms the locker waits for an answer from Redis (connecting included)
   * before it gives up (0: no limit), on its own connection and on a
   * borrowed one: `acquire` and `release` then reject with a transient
   * `IOError`, and `close()` drops its own connection instead of waiting.
   * Default {@link DEFAULT_REDIS_COMMAND_TIMEOUT_MS}.
   */
  commandTimeoutMs?: number;
}

/** Default of `RedisLockerOptions.commandTimeoutMs`. */
export const DEFAULT_REDIS_COMMAND_TIMEOUT_MS = 15_000;

const REDIS_LOCKER_OPTION_KEYS = knownKeys<RedisLockerOptions>({ url: true, client: true, prefix: true, commandTimeoutMs: true });

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
  readonly #timeoutMs: number;
  #closed = false;
  /** Aborted as close() begins: every acquire under way rejects with `ClosedError` then. */
  readonly #closeStarted = closeController();
  /** Tries, give-backs and releases under way: close() lets them finish before it quits its own connection. */
  readonly #running = new RunningCalls();
  /** The releases of the locks this locker holds: close() gives them back. */
  readonly #holding = new Set<() => Promise<void>>();
  /** The first `close()`'s run, which every call returns. */
  #closing: Promise<void> | undefined;

  private constructor(client: Redis, owns: boolean, prefix: string, timeoutMs: number) {
    this.#client = client;
    this.#owns = owns;
    this.#prefix = prefix;
    this.#timeoutMs = timeoutMs;
  }

  /**
   * `command`, or a transient `IOError` once `commandTimeoutMs` passes
   * without an answer (ioredis has no per-command timeout of its own for a
   * borrowed client). A late answer goes to `onLate`, or is dropped.
   */
  #timed<T>(command: Promise<T>, what: string, onLate?: (late: T) => void): Promise<T> {
    const failed = (err: unknown): never => {
      throw asIOError(what, err, SOURCE);
    };
    const ms = this.#timeoutMs;
    return withDeadline(command.catch(failed), ms, () => new IOError(`redis locker: ${what} failed: no answer within ${ms} ms`, { transient: true }), onLate);
  }

  /**
   * Connects (with `url`) or wraps `client`.
   * @throws InvalidArgumentError neither or both of `url` and `client`, a `prefix` that is not a string, a bad `commandTimeoutMs`, an unknown option.
   * @throws IOError the server cannot be reached (within `commandTimeoutMs`).
   */
  static async open(opts: RedisLockerOptions): Promise<RedisLocker> {
    rejectUnknownKeys('redis locker option', opts, REDIS_LOCKER_OPTION_KEYS);
    const hasUrl = typeof opts?.url === 'string' && opts.url !== '';
    if (hasUrl === (opts?.client !== undefined)) throw new InvalidArgumentError('redis locker needs exactly one of url and client');
    const prefix = opts.prefix ?? 'ferry:lock:';
    if (typeof prefix !== 'string') throw new InvalidArgumentError(`redis locker: prefix must be a string, got ${shown(prefix)}`);
    const timeoutMs = opts.commandTimeoutMs ?? DEFAULT_REDIS_COMMAND_TIMEOUT_MS;
    if (typeof timeoutMs !== 'number' || !Number.isInteger(timeoutMs) || timeoutMs < 0 || timeoutMs > MAX_TIMER_MS) {
      throw new InvalidArgumentError(`redis locker: commandTimeoutMs must be an integer from 0 to ${MAX_TIMER_MS} (ms), got ${shown(timeoutMs)}`);
    }
    if (opts.client) return new RedisLocker(opts.client, false, prefix, timeoutMs);
    const mod = (await import('ioredis')) as unknown as { Redis: new (url: string, o: object) => Redis };
    const client = new mod.Redis(opts.url!, { lazyConnect: true, maxRetriesPerRequest: 2, ...(timeoutMs > 0 ? { connectTimeout: timeoutMs } : {}) });
    // The client's own reason (a refused address, say): its connect() rejects only with "Connection is closed.".
    let reason: Error | undefined;
    client.on('error', (err: Error) => (reason ??= err));
    const locker = new RedisLocker(client, true, prefix, timeoutMs);
    try {
      await locker.#timed(
        client.connect().catch((err: unknown) => Promise.reject(reason ?? err)),
        `connecting to ${client.options.host ?? '?'}:${client.options.port ?? '?'}`,
      );
      // ioredis selects the URL's database on connect but carries on in 0 when the server refuses the index.
      const db = client.options.db ?? 0;
      if (db !== 0) {
        // The server's refusal (an index out of range) stays one: not transient.
        const refused = (err: Error) => Promise.reject(new IOError(`redis locker: selecting database ${db} failed: ${err.message}`, { transient: err.name !== 'ReplyError', cause: err }));
        await locker.#timed(client.select(db).catch(refused), `selecting database ${db}`);
      }
    } catch (err) {
      client.disconnect();
      throw err;
    }
    return locker;
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
    const closing = this.#closeStarted.signal;
    // One signal for the caller giving up and the locker closing; each ends a try and a wait between tries at once.
    const stop = opts.signal ? AbortSignal.any([opts.signal, closing]) : closing;
    const why = () => (closing.aborted ? new ClosedError('redis locker is closed') : abortedWait(key, opts.signal!));
    // A grant that comes after the timeout, an abort or a close: given back at once.
    // Tracked, so a close() that comes next sends it before it quits.
    const giveBack = (fence: number) => void (fence > 0 ? this.#running.track(this.#timed(this.#client.eval(RELEASE, 1, redisKey, token), `giving back ${key}`)) : undefined)?.catch(() => undefined);
    for (let attempt = 0; ; attempt++) {
      if (this.#closed) throw new ClosedError('redis locker is closed');
      if (opts.signal?.aborted) await pause(0, key, opts.signal);
      const startedAt = performance.now();
      const answer = (this.#client.eval(ACQUIRE, 2, redisKey, `${redisKey}:fence`, token, String(ttlMs)) as Promise<unknown>).then(Number);
      const taking = this.#running.track(this.#timed(answer, `acquiring ${key}`, giveBack));
      const fence = await untilAborted(taking, stop, why, (late) => void late.then(giveBack, () => undefined));
      if (fence > 0) {
        // Granted as close() began: given back (close() waits for it), and the call is closed out.
        if (this.#closed) {
          giveBack(fence);
          throw new ClosedError('redis locker is closed');
        }
        return this.#held(key, redisKey, token, fence, startedAt + ttlMs);
      }
      await pause(retryDelay(attempt), key, stop).catch(() => Promise.reject(why()));
    }
  }

  #held(key: string, redisKey: string, token: string, fence: number, expiresAt: number): HeldLock {
    let done: Promise<void> | undefined;
    // Deletes the key only while it holds this token: after the TTL a newer holder's lock stays.
    // A failed attempt is not kept: the next call tries again.
    const release = (): Promise<void> =>
      (done ??= this.#running.track(
        (async () => {
          try {
            if (performance.now() < expiresAt) await this.#timed(this.#client.eval(RELEASE, 1, redisKey, token), `releasing ${key}`);
            this.#holding.delete(release);
          } catch (err) {
            done = undefined;
            throw err;
          }
        })(),
      ));
    this.#holding.add(release);
    return { key, fence, expiresAt, release };
  }

  /**
   * Rejects every `acquire` under way with `ClosedError` at once, gives
   * back the locks this locker holds, then, on a connection the locker
   * opened, lets the tries under way finish (each at most
   * `commandTimeoutMs`; a grant among them is given back) and closes it,
   * dropping it when Redis does not answer the goodbye within
   * `commandTimeoutMs`. A borrowed client stays open and is not waited on:
   * a grant that lands on it later is given back there. A lock it could not
   * give back lapses at its TTL. Idempotent: a call made while another runs
   * resolves when that one does.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    this.#closeStarted.abort();
    await Promise.allSettled([...this.#holding].map((release) => release()));
    if (!this.#owns) return;
    // Each try ends within commandTimeoutMs.
    await this.#running.settled();
    await this.#timed(this.#client.quit(), 'closing').catch(() => this.#client.disconnect());
  }
}
