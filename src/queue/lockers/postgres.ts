/**
 * `PostgresLocker`: the distributed-locker SPI on PostgreSQL session-level
 * advisory locks. A hold keeps one pooled connection checked out, on which
 * `pg_try_advisory_lock` took the key's 64-bit hash; release unlocks it and
 * returns the connection. When the holding process dies its connection
 * closes and the server frees the lock at once; a holder that outlives its
 * TTL gives the lock up itself when the TTL passes.
 *
 * The fence is a transaction ID (`txid_current()`) taken in the same
 * statement as the lock: transaction IDs only grow, across the whole server,
 * so every later acquisition of a key has a larger fence.
 *
 * `pg` is loaded only when the locker opens its own pool.
 */
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { asIOError, ClosedError, InvalidArgumentError, type IOErrorSource } from '../../errors.js';
import { poolConfig } from '../stores/postgres/connection.js';
import { checkAcquire, pause, retryDelay } from './checks.js';
import type { AcquireOptions, DistributedLocker, HeldLock } from './types.js';

/** Options of `PostgresLocker.open`: a connection string, or a pool the caller owns. */
export interface PostgresLockerOptions {
  /** A libpq-style URL; the locker opens (and closes) its own pool. */
  connectionString?: string;
  /** A `pg.Pool` to borrow; every held lock keeps one of its connections checked out. Never ended by the locker. */
  pool?: pg.Pool;
  /** Size of the locker's own pool, which bounds the locks this process can hold at once (ignored with `pool`). Default 10. */
  poolSize?: number;
  /** Prefix hashed with each key, so two applications on one server do not share keys. Default `ferry:lock:`. */
  prefix?: string;
}

const TRY_LOCK = 'SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok, txid_current()::text AS fence';
const UNLOCK = 'SELECT pg_advisory_unlock(hashtextextended($1, 0)) AS ok';

/** How driver and server errors become `IOError`s (every one taken as transient). */
const SOURCE: IOErrorSource = { name: 'postgres locker', withCode: true };

const ignore = () => undefined;

/** Returns `client` to its pool (destroyed when `err` is given) without the 'error' listener acquire gave it. */
function giveBack(client: pg.PoolClient, err?: Error): void {
  client.removeListener('error', ignore);
  client.release(err);
}

/**
 * A `DistributedLocker` on PostgreSQL advisory locks, shared by every process
 * using the same server and prefix. Waiting polls with a jittered backoff
 * (2–50 ms), returning the connection to the pool between attempts.
 * Use `PostgresLocker.open`.
 */
export class PostgresLocker implements DistributedLocker {
  readonly #pool: pg.Pool;
  readonly #owns: boolean;
  readonly #prefix: string;
  #closed = false;
  /** The first `close()`'s run, which every call returns. */
  #closing: Promise<void> | undefined;

  private constructor(pool: pg.Pool, owns: boolean, prefix: string) {
    this.#pool = pool;
    this.#owns = owns;
    this.#prefix = prefix;
  }

  /**
   * Opens a pool (with `connectionString`) or wraps `pool`, and checks the server answers.
   * When neither the URL nor `PGUSER` names a user (and `$USER` is unset), it
   * connects as the operating system's login name, as libpq does.
   * @throws InvalidArgumentError neither or both of `connectionString` and `pool`, a `connectionString` pg cannot read (keyword/value), or a bad `poolSize`.
   * @throws IOError the server cannot be reached.
   */
  static async open(opts: PostgresLockerOptions): Promise<PostgresLocker> {
    const hasUrl = typeof opts?.connectionString === 'string' && opts.connectionString !== '';
    if (hasUrl === (opts?.pool !== undefined)) throw new InvalidArgumentError('postgres locker needs exactly one of connectionString and pool');
    if (opts.poolSize !== undefined && (!Number.isInteger(opts.poolSize) || opts.poolSize < 1)) throw new InvalidArgumentError('postgres locker: poolSize must be a positive integer');
    let pool = opts.pool;
    if (!pool) {
      const mod = (await import('pg')) as unknown as { default?: typeof pg } & typeof pg;
      const Driver = mod.default ?? mod;
      pool = new Driver.Pool(poolConfig(Driver, opts.connectionString!, opts.poolSize ?? 10));
      pool.on('error', () => undefined);
      // A session the server ends as the connection becomes ready emits on the client before acquire can listen.
      pool.on('connect', (client) => void client.on('error', ignore));
    }
    const locker = new PostgresLocker(pool, opts.pool === undefined, opts.prefix ?? 'ferry:lock:');
    try {
      await pool.query('SELECT 1');
    } catch (err) {
      await locker.close();
      throw asIOError('connecting', err, SOURCE);
    }
    return locker;
  }

  /**
   * Waits until `key` is free and takes it for `ttlMs`.
   * @throws InvalidArgumentError empty key, a key with NUL, or a `ttlMs` that is not an integer from 1 to 2³¹−1.
   * @throws LockedError `opts.signal` aborted while the key was held.
   * @throws ClosedError the locker was closed.
   * @throws IOError the database failed.
   */
  async acquire(key: string, ttlMs: number, opts: AcquireOptions = {}): Promise<HeldLock> {
    checkAcquire(key, ttlMs);
    const full = this.#prefix + key;
    for (let attempt = 0; ; attempt++) {
      if (this.#closed) throw new ClosedError('postgres locker is closed');
      if (opts.signal?.aborted) await pause(0, key, opts.signal);
      const startedAt = performance.now();
      let client: pg.PoolClient;
      try {
        client = await this.#pool.connect();
      } catch (err) {
        throw asIOError(`acquiring ${key}`, err, SOURCE);
      }
      // A lost connection emits on the client while it is checked out (held
      // for a lock's whole TTL): with no listener that ends the process. The
      // next query on it fails instead, or the lock's release does.
      client.on('error', ignore);
      let row: { ok: boolean; fence: string };
      try {
        row = (await client.query<{ ok: boolean; fence: string }>(TRY_LOCK, [full])).rows[0]!;
      } catch (err) {
        giveBack(client, err as Error);
        throw asIOError(`acquiring ${key}`, err, SOURCE);
      }
      if (row.ok) return this.#held(key, full, client, Number(row.fence), startedAt + ttlMs);
      giveBack(client);
      await pause(retryDelay(attempt), key, opts.signal);
    }
  }

  #held(key: string, full: string, client: pg.PoolClient, fence: number, expiresAt: number): HeldLock {
    let done: Promise<void> | undefined;
    const free = () =>
      (done ??= (async () => {
        clearTimeout(timer);
        try {
          await client.query(UNLOCK, [full]);
          giveBack(client);
        } catch (err) {
          // A connection in an unknown state must not go back to the pool
          // holding the lock: destroying it frees the lock on the server.
          giveBack(client, err as Error);
          throw asIOError(`releasing ${key}`, err, SOURCE);
        }
      })());
    const timer = setTimeout(() => void free().catch(() => undefined), Math.max(0, expiresAt - performance.now()));
    timer.unref();
    return { key, fence, expiresAt, release: free };
  }

  /** Ends the pool the locker opened (held locks are freed with their connections); a borrowed pool stays open. Idempotent: a call made while another runs resolves when that one does. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    if (this.#owns) await this.#pool.end().catch(() => undefined);
  }
}
