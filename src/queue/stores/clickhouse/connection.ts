/**
 * One ClickHouse store handle's way to its database, used by the store
 * (store.ts) and its claims and fenced writes (claim.ts): the statements run
 * through the client with the store's settings and errors, the server clock
 * estimate, and the distributed lock every read-then-write runs under.
 * ClickHouse has no row locks and no transactions, so that lock is what makes
 * a read and the write that follows it atomic.
 */
import { performance } from 'node:perf_hooks';
import type { ClickHouseClient } from '@clickhouse/client';
import { asIOError, ClosedError, FerryError, IOError } from '../../../errors.js';
import { ProcessLocker } from '../../lockers/process.js';
import type { DistributedLocker, HeldLock } from '../../lockers/types.js';
import { clickhouseTransient } from '../transient.js';
import { ServerClock } from './clock.js';
import type { SqlValue } from './escape.js';
import { insertRows, render } from './sql.js';
import type { StatementName } from './sql.js';

/** Re-read the server clock before a locked operation when the last reading is older than this. */
const CLOCK_REFRESH_MS = 1000;
/** The server settings every statement runs with: statements carry their values inline, so allow long ones. */
export const SETTINGS = { max_query_size: '268435456' } as const;

/**
 * Driver and server errors become `IOError`s with the original as `cause`;
 * `transient` says whether a retry can help (by the server's error code, see
 * `../transient.ts`).
 */
export function wrap(err: unknown, what: string): FerryError {
  return asIOError(what, err, { name: 'clickhouse store', firstLine: true, transient: clickhouseTransient });
}

let driver: Promise<typeof import('@clickhouse/client')> | undefined;

/** Imports `@clickhouse/client` on first use, so importing `ferry/queue` never loads it. */
export function loadDriver(): Promise<typeof import('@clickhouse/client')> {
  driver ??= import('@clickhouse/client');
  return driver;
}

/** One calibrated server clock per endpoint and process: stores on one server share it. */
const clocks = new Map<string, Promise<ServerClock>>();

/** The calibrated clock of `endpoint`'s server, calibrating it (up to 1.5 s) on first use in this process. */
export function serverClock(endpoint: string, client: ClickHouseClient, sql: Record<StatementName, string>): Promise<ServerClock> {
  let clock = clocks.get(endpoint);
  if (!clock) {
    clock = calibrated(client, sql);
    clocks.set(endpoint, clock);
    clock.catch(() => clocks.delete(endpoint));
  }
  return clock;
}

/** A server clock calibrated against `client`'s server: milliseconds where the server has `now64`, else seconds refined by sampling. */
async function calibrated(client: ClickHouseClient, sql: Record<StatementName, string>): Promise<ServerClock> {
  const read = async (q: string) => {
    const rs = await client.query({ query: q, format: 'JSONEachRow' });
    return (await rs.json<Record<string, string>>())[0]!;
  };
  const version = (await read(sql['server-version'])).v ?? '0';
  const ms = Number.parseInt(version, 10) >= 20;
  const clock = new ServerClock(ms ? 1 : 1000);
  const q = ms ? sql['server-milliseconds'] : sql['server-seconds'];
  await clock.calibrate(async () => Number((await read(q)).reading));
  return clock;
}

/**
 * The process-wide lock of the fenced-write fast path (see claim.ts), shared
 * by every store of the process: a claim token is used by the process that
 * claimed it, so its writes never interleave, whichever store handle makes them.
 */
const processLocks = new ProcessLocker();

/** Lock keys. Topic and group names are `[A-Za-z0-9._-]`, so `/` cannot occur inside one. */
export const topicKey = (db: string, topic: string) => `ferry/${db}/topic/${topic}`;
export const groupKey = (db: string, topic: string, group: string) => `ferry/${db}/group/${topic}/${group}`;
/** Schedule names are `[A-Za-z0-9._-]` too. */
export const scheduleKey = (db: string, name: string) => `ferry/${db}/schedule/${name}`;

/**
 * A store handle's connection to its database. Every call but `close`
 * throws `ClosedError` once the handle is closed.
 */
export class Connection {
  readonly client: ClickHouseClient;
  /** The database name (unquoted). */
  readonly db: string;
  readonly #sql: Record<StatementName, string>;
  /** The shared locker the store was opened with, if any. */
  readonly locker: DistributedLocker | undefined;
  readonly #lockOf: DistributedLocker;
  /** This process's locks, shared by every store in it: fenced writes of one group never interleave within the process. */
  readonly local: DistributedLocker = processLocks;
  /** How long one operation may hold a lock, ms. */
  readonly lockTtlMs: number;
  /** The server clock estimate (ms). */
  readonly clock: ServerClock;
  readonly #clockQuery: StatementName;
  #lastReading = -Infinity;
  #reading: Promise<void> | undefined;
  #closed = false;

  constructor(client: ClickHouseClient, db: string, sql: Record<StatementName, string>, locker: DistributedLocker | undefined, lockTtlMs: number, clock: ServerClock) {
    this.client = client;
    this.db = db;
    this.#sql = sql;
    this.locker = locker;
    this.#lockOf = locker ?? new ProcessLocker();
    this.lockTtlMs = lockTtlMs;
    this.clock = clock;
    this.#clockQuery = clock.resolutionMs === 1 ? 'server-milliseconds' : 'server-seconds';
  }

  /** True once `close` was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /** @throws ClosedError once `close` was called. */
  assertOpen(): void {
    if (this.#closed) throw new ClosedError('clickhouse store is closed');
  }

  /** The rows statement `name` returns, as JSON objects. */
  async rows<R>(name: StatementName, values: Record<string, SqlValue> = {}): Promise<R[]> {
    this.assertOpen();
    try {
      const rs = await this.client.query({ query: render(this.#sql[name], values), format: 'JSONEachRow', clickhouse_settings: SETTINGS });
      return await rs.json<R>();
    } catch (err) {
      throw wrap(err, name);
    }
  }

  /** Runs statement `name`, which returns no rows, with `values` filled in. */
  exec(name: StatementName, values: Record<string, SqlValue> = {}): Promise<void> {
    return this.#command(name, render(this.#sql[name], values));
  }

  /** Inserts `rows` with the insert statement `name`; nothing when there are none. */
  async insert(name: StatementName, rows: SqlValue[][]): Promise<void> {
    if (rows.length > 0) await this.#command(name, insertRows(this.#sql[name], rows));
  }

  async #command(name: StatementName, text: string): Promise<void> {
    this.assertOpen();
    try {
      await this.client.command({ query: text, clickhouse_settings: SETTINGS });
    } catch (err) {
      throw wrap(err, name);
    }
  }

  /**
   * The server time in ms. When the last reading of the server clock is over
   * a second old, another is taken in the background (one at a time): the
   * estimate is already calibrated, so no operation waits for it.
   */
  async now(): Promise<number> {
    if (performance.now() - this.#lastReading > CLOCK_REFRESH_MS && !this.#reading) {
      this.#lastReading = performance.now();
      const t0 = performance.now();
      this.#reading = this.rows<{ reading: string }>(this.#clockQuery)
        .then(([r]) => this.clock.observe(Number(r!.reading), t0, performance.now()))
        .catch(() => undefined)
        .finally(() => (this.#reading = undefined));
    }
    return this.clock.now();
  }

  /**
   * Runs `fn` holding the locks of `keys` (taken in sorted order, so two
   * callers never wait on each other in a cycle), with the server time read
   * after the last lock was taken. `fn` calls `held()` before each write:
   * it throws `IOError` when a lock is about to lapse.
   */
  async locked<T>(keys: string[], fn: (now: number, held: () => void) => Promise<T>): Promise<T> {
    this.assertOpen();
    const sorted = [...new Set(keys)].sort();
    const locks: HeldLock[] = [];
    try {
      for (const k of sorted) locks.push(await this.#lockOf.acquire(k, this.lockTtlMs));
      // Called before each write: a write made after a lock lapsed could race
      // the next holder, so the operation fails instead (the engine retries).
      const margin = Math.min(1000, this.lockTtlMs / 10);
      const held = () => {
        const t = performance.now();
        for (const l of locks) if (t > l.expiresAt - margin) throw new IOError(`clickhouse store: lock ${l.key} is about to lapse; operation abandoned before writing`);
      };
      return await fn(await this.now(), held);
    } finally {
      for (const l of locks.reverse()) await l.release().catch(() => undefined);
    }
  }

  /** Marks the handle closed and waits for a background clock reading; the client is the store's to close. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#reading;
  }
}
