/**
 * `PostgresLocker`: the distributed-locker SPI on a table of leases,
 * `<schema>.locks` (made at open when missing). Taking a key is one upsert
 * that succeeds only where the key's lease has run out on the database's
 * clock (or the key is new); releasing ends the lease while it still carries
 * this holder's token. Nothing is kept open between the two, so a dropped
 * connection changes nothing: the lease stands until its TTL or its release.
 * (Session advisory locks, used before, were freed by the server the moment
 * the holder's connection dropped, while the holder still counted on its TTL:
 * two holders at once.) A holder that dies leaves its lease to run out.
 *
 * A key's row is never deleted, so every grant after a key's first one is
 * the upsert's update, which draws its fence from a sequence under the row's
 * lock: grants draw in grant order. (A delete on release let a waiter's
 * insert, whose fence was drawn before it waited, land after a grant that
 * drew a larger one.) Rows are keyed by a SHA-256 of the key, so a key of any
 * length fits the index.
 *
 * `pg` is loaded only when the locker opens its own pool.
 */
import { createHash, randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import { asIOError, ClosedError, InvalidArgumentError, type IOErrorSource } from '../../errors.js';
import { knownKeys, rejectUnknownKeys } from '../../known-keys.js';
import { DEFAULT_POSTGRES_SCHEMA, pgTimeoutWording, poolConfig, resolveTimeouts } from '../stores/postgres/connection.js';
import { quoteSchema } from '../stores/postgres/sql.js';
import { SqlFiles } from '../stores/sql-files.js';
import { LOCK_NAMESPACE, schemaLockKey } from '../stores/postgres/migrate.js';
import { abortedWait, checkAcquire, closeController, pause, retryDelay, RunningCalls, untilAborted, withDeadline } from './checks.js';
import { postgresTransient } from '../stores/transient.js';
import type { AcquireOptions, DistributedLocker, HeldLock } from './types.js';

/** Options of `PostgresLocker.open`: a connection string, or a pool the caller owns. */
export interface PostgresLockerOptions {
  /** A libpq-style URL; the locker opens (and closes) its own pool. */
  connectionString?: string;
  /** A `pg.Pool` to borrow (one connection per statement, none kept between). Never ended by the locker. */
  pool?: pg.Pool;
  /** Size of the locker's own pool (ignored with `pool`). Default 10. */
  poolSize?: number;
  /** Prefix of each key, so two applications on one server do not share keys. Default `ferry:lock:`. */
  prefix?: string;
  /** Schema of the `locks` table and `lock_fences` sequence, made when missing. Default `ferry`. */
  schema?: string;
  /** Ms to open a connection, or to wait for a free one in the locker's own pool. Default 10000 (as the store's). */
  connectTimeoutMs?: number;
  /** Ms the server lets a statement of the locker's own pool run before it cancels it (0: no limit). Default 10000. */
  statementTimeoutMs?: number;
  /**
   * Ms the locker waits for a statement's answer before it gives up (0: no
   * limit), on its own pool and on a borrowed one: `acquire` and `release`
   * then reject with a transient `IOError`, and `close()` waits for no
   * statement longer. Default 15000.
   */
  queryTimeoutMs?: number;
}

const POSTGRES_LOCKER_OPTION_KEYS = knownKeys<PostgresLockerOptions>({
  connectionString: true,
  pool: true,
  poolSize: true,
  prefix: true,
  schema: true,
  connectTimeoutMs: true,
  statementTimeoutMs: true,
  queryTimeoutMs: true,
});

const files = new SqlFiles(new URL('./postgres/', import.meta.url));

/** The statements (postgres/*.sql), for schema `s` (quoted). */
function statements(s: string) {
  const read = (name: string) => files.read(`${name}.sql`).replaceAll('__SCHEMA__', s);
  return {
    // Three statements, run in one round trip (no parameters).
    setUp: read('set-up'),
    take: read('take'),
    give: read('give'),
  };
}
type Statements = ReturnType<typeof statements>;

/**
 * The row key of `key`: a fixed-size digest, whatever the key's length, of
 * its UTF-16 code units (UTF-8 would turn every unpaired surrogate into
 * U+FFFD, and keys that differ only there would share a lease).
 */
function keyHash(key: string): string {
  return createHash('sha256').update(Buffer.from(key, 'utf16le')).digest('hex');
}

/** How client and server errors become `IOError`s: transient or not by SQLSTATE, as the store's. */
const SOURCE: IOErrorSource = { name: 'postgres locker', withCode: true, transient: postgresTransient, reword: pgTimeoutWording };

/** The error of a call on a borrowed pool that got no answer within `ms`. */
function noAnswer(ms: number): Error {
  return new Error(`no answer within ${ms} ms (queryTimeoutMs; waiting for a connection of the borrowed pool included)`);
}

/**
 * Makes the locker's table and sequence in `schema` when missing, on one
 * connection of `pool`, in one transaction under the schema's set-up lock.
 */
async function setUp(pool: pg.Pool, schema: string, text: string): Promise<void> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    // Lockers and stores opening one schema together serialise here (the
    // store's migrations take the same lock): two CREATE ... IF NOT EXISTS
    // at once can both try to create.
    await client.query('BEGIN');
    // A store's migrations may hold the lock for long: no statement timeout here (as they run without one).
    await client.query('SET LOCAL statement_timeout = 0');
    await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [LOCK_NAMESPACE, schemaLockKey(schema)]);
    await client.query(text);
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch((e: Error) => (broken = e));
    throw err;
  } finally {
    client.release(broken);
  }
}

/**
 * A `DistributedLocker` on a PostgreSQL table of leases, shared by every
 * process using the same server, schema and prefix. Waiting polls with a
 * jittered backoff (2–50 ms). Use `PostgresLocker.open`.
 */
export class PostgresLocker implements DistributedLocker {
  readonly #pool: pg.Pool;
  readonly #owns: boolean;
  readonly #prefix: string;
  readonly #sql: Statements;
  /** The client-side answer timeout of every statement (0: none). */
  readonly #queryTimeoutMs: number;
  /** Statements under way (takes and gives): close() lets them finish before it ends the pool. */
  readonly #running = new RunningCalls();
  /** The leases this locker holds and has not given back: close() gives them back. */
  readonly #held = new Set<() => Promise<void>>();
  #closed = false;
  /** Aborted as close() begins: every acquire under way rejects with `ClosedError` then. */
  readonly #closeStarted = closeController();
  /** The first `close()`'s run, which every call returns. */
  #closing: Promise<void> | undefined;

  private constructor(pool: pg.Pool, owns: boolean, prefix: string, sql: Statements, queryTimeoutMs: number) {
    this.#pool = pool;
    this.#owns = owns;
    this.#prefix = prefix;
    this.#sql = sql;
    this.#queryTimeoutMs = queryTimeoutMs;
  }

  /**
   * Runs `text` on a pooled connection, with the answer timeout. A borrowed
   * pool may wait for a connection with no timeout of its own (pg's
   * default), and the answer timeout starts only once one is found: there
   * the whole call, that wait included, gets `queryTimeoutMs`. `onLate` gets
   * a result that came after that.
   */
  #query<R extends pg.QueryResultRow>(text: string, values: unknown[], onLate?: (late: pg.QueryResult<R>) => void): Promise<pg.QueryResult<R>> {
    const q: pg.QueryConfig & { query_timeout?: number } = { text, values };
    const ms = this.#queryTimeoutMs;
    if (ms > 0) q.query_timeout = ms;
    const running = this.#pool.query<R>(q);
    if (this.#owns) return running;
    return withDeadline(running, ms, () => noAnswer(ms), onLate);
  }

  /**
   * Opens a pool (with `connectionString`) or wraps `pool`, and makes the
   * schema's `locks` table and `lock_fences` sequence when missing.
   * When neither the URL nor `PGUSER` names a user (and `$USER` is unset), it
   * connects as the operating system's login name, as libpq does.
   * @throws InvalidArgumentError neither or both of `connectionString` and `pool`, a `connectionString` pg cannot read (keyword/value), a bad `poolSize`, `schema` or timeout, an unknown option.
   * @throws IOError the server cannot be reached, or refuses to make the table.
   */
  static async open(opts: PostgresLockerOptions): Promise<PostgresLocker> {
    rejectUnknownKeys('postgres locker option', opts, POSTGRES_LOCKER_OPTION_KEYS);
    const hasUrl = typeof opts?.connectionString === 'string' && opts.connectionString !== '';
    if (hasUrl === (opts?.pool !== undefined)) throw new InvalidArgumentError('postgres locker needs exactly one of connectionString and pool');
    if (opts.poolSize !== undefined && (!Number.isInteger(opts.poolSize) || opts.poolSize < 1)) throw new InvalidArgumentError('postgres locker: poolSize must be a positive integer');
    const timeouts = resolveTimeouts(opts, 'postgres locker');
    const schema = opts.schema ?? DEFAULT_POSTGRES_SCHEMA;
    let quoted: string;
    try {
      quoted = quoteSchema(schema);
    } catch (err) {
      throw new InvalidArgumentError((err as Error).message.replace(/^postgres store:/, 'postgres locker:'));
    }
    const sql = statements(quoted);
    const prefix = opts.prefix ?? 'ferry:lock:';
    if (typeof prefix !== 'string' || prefix.includes('\0')) throw new InvalidArgumentError('postgres locker: prefix must be a string without NUL');
    let pool = opts.pool;
    if (!pool) {
      const mod = (await import('pg')) as unknown as { default?: typeof pg } & typeof pg;
      const Driver = mod.default ?? mod;
      pool = new Driver.Pool(poolConfig(Driver, opts.connectionString!, opts.poolSize ?? 10, timeouts));
      pool.on('error', () => undefined);
      // A session the server ends as the connection becomes ready emits on the client before a query can listen.
      pool.on('connect', (client) => void client.on('error', () => undefined));
    }
    const locker = new PostgresLocker(pool, opts.pool === undefined, prefix, sql, timeouts.queryTimeoutMs);
    try {
      const settingUp = setUp(pool, schema, sql.setUp);
      // A borrowed pool may wait for a connection, and answer, with no timeout of its own: the whole set-up gets queryTimeoutMs there.
      const ms = timeouts.queryTimeoutMs;
      await (opts.pool ? withDeadline(settingUp, ms, () => noAnswer(ms)) : settingUp);
    } catch (err) {
      await locker.close();
      throw asIOError('setting up', err, SOURCE);
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
    const hash = keyHash(full);
    const closing = this.#closeStarted.signal;
    // One signal for the caller giving up and the locker closing; each ends a try and a wait between tries at once.
    const stop = opts.signal ? AbortSignal.any([opts.signal, closing]) : closing;
    const why = () => (closing.aborted ? new ClosedError('postgres locker is closed') : abortedWait(key, opts.signal!));
    for (let attempt = 0; ; attempt++) {
      if (this.#closed) throw new ClosedError('postgres locker is closed');
      if (opts.signal?.aborted) await pause(0, key, opts.signal);
      // Taken before the request: the lease the server writes ends no sooner than this plus the TTL.
      const startedAt = performance.now();
      const token = randomUUID();
      // A grant after an abort, a close or a failure of the call (an answer
      // that never came may still have been a grant) is given back, tracked
      // so a close() that comes next waits for it before it ends the pool.
      const giveBack = () => void this.#running.track(this.#query(this.#sql.give, [hash, token])).catch(() => undefined);
      const taking = this.#running.track(
        // On a borrowed pool a grant can also come after the deadline (its connection came late): given back then.
        this.#query<{ fence: string }>(this.#sql.take, [hash, full, token, ttlMs], (late) => late.rows.length === 1 && giveBack()).then(
          (r) => r.rows,
          (err: unknown) => {
            giveBack();
            throw asIOError(`acquiring ${key}`, err, SOURCE);
          },
        ),
      );
      const late = (p: Promise<{ fence: string }[]>) => void p.then((rows) => rows.length === 1 && giveBack(), () => undefined);
      const rows = await untilAborted(taking, stop, why, late);
      if (rows.length === 1) {
        const lock = this.#lease(key, hash, token, Number(rows[0]!.fence), startedAt + ttlMs);
        // Granted while close() waited for this statement: given back with the rest, and the call is closed out.
        if (this.#closed) {
          await lock.release().catch(() => undefined);
          throw new ClosedError('postgres locker is closed');
        }
        return lock;
      }
      await pause(retryDelay(attempt), key, stop).catch(() => Promise.reject(why()));
    }
  }

  #lease(key: string, hash: string, token: string, fence: number, expiresAt: number): HeldLock {
    let done: Promise<void> | undefined;
    // Ends the lease only while it is still this holder's: after the TTL a newer holder's lease stays.
    // A failed attempt is not kept: the next call tries again.
    const free = (): Promise<void> =>
      (done ??= this.#running.track(
        (async () => {
          try {
            await this.#query(this.#sql.give, [hash, token]);
            this.#held.delete(free);
          } catch (err) {
            done = undefined;
            throw asIOError(`releasing ${key}`, err, SOURCE);
          }
        })(),
      ));
    this.#held.add(free);
    return { key, fence, expiresAt, release: free };
  }

  /**
   * Rejects every `acquire` under way with `ClosedError` at once, gives back
   * every lease this locker holds, then, on a pool it opened, lets the
   * statements under way finish (each at most `queryTimeoutMs`; a grant
   * among them is given back) and ends the pool. A borrowed pool stays open
   * and is not waited on: a grant that lands on it later is given back
   * there. A lease it could not give back lapses at its TTL. Idempotent: a
   * call made while another runs resolves when that one does.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    this.#closeStarted.abort();
    await Promise.allSettled([...this.#held].map((free) => free()));
    if (!this.#owns) return;
    await this.#running.settled();
    await this.#pool.end().catch(() => undefined);
  }
}
