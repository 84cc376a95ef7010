/**
 * The Postgres store (queue type `postgres`): one database shared by any
 * number of instances on any number of hosts. `pg` is imported only when a
 * store is opened.
 *
 * Safety across instances rests on the database alone: leases, due times and
 * backoffs are read from the database clock; claims lock rows with
 * `FOR UPDATE SKIP LOCKED`; every write after a claim names its claim token;
 * the in-flight cap and the rate limit of a group are counted under that
 * group's row lock; a pause is read by each claim in its own statement; and
 * a key lane's head is judged from committed rows. The statements live in the
 * `.sql` files beside this module; docs/QUEUE.md describes the tables.
 */
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { asIOError, ClosedError, InvalidArgumentError, IOError, PayloadTooLargeError, type IOErrorSource } from '../../../errors.js';
import { deliveryId } from '../../delivery-id.js';
import { parseSeqCursor } from '../seq-cursor.js';
import type { ScheduleRecord } from '../../schedules/types.js';
import type { AckAndClaimed, ClaimRequest, Claimed, ConsumerGroup, KillOptions, MessagePage, PurgePolicy, StartFrom, Store, StoreCapabilities, StoreStats, StoredMessage } from '../../types.js';
import { postgresTransient } from '../transient.js';
import { DEFAULT_POSTGRES_SCHEMA, destroySocket, pgTimeoutWording, poolConfig, resolveTimeouts, POSTGRES_SESSION_OPTIONS } from './connection.js';
import type { PostgresTimeouts } from './connection.js';
import { claimLimit } from './claim-limit.js';
import type { BudgetRow } from './claim-limit.js';
import { appendValues, TopicGroupsCache } from './fan-out.js';
import type { GroupsOfRow } from './fan-out.js';
import { migrate } from './migrate.js';
import { OwnNotifications } from './own-notifications.js';
import { splitToken, stillHeld, toClaimed, toMessage } from './rows.js';
import type { ClaimRow, HeldRow } from './rows.js';
import { scheduleFromRow, scheduleValues } from './schedule-rows.js';
import type { ScheduleRow } from './schedule-rows.js';
import { arrayLiteral, seqsAndTokens, quoteSchema, statements, wakeChannel } from './sql.js';
import { listenLoop } from './wake-listener.js';
import type { StatementName } from './sql.js';
import { knownKeys, rejectUnknownKeys } from '../../../known-keys.js';

/** Options of `PostgresStore.open`: a connection string, or a pool the caller owns. */
export interface PostgresStoreOptions {
  /** A libpq-style URL, e.g. `postgres://user@host/db`. The store opens (and closes) its own pool. */
  connectionString?: string;
  /**
   * A `pg.Pool` to borrow instead; the store never ends it nor changes its
   * settings. Its own pools connect with `POSTGRES_SESSION_OPTIONS` (generic
   * plans, no JIT); give a borrowed pool the same `options` for the same
   * planning cost per call.
   */
  pool?: pg.Pool;
  /** Schema holding the queue's tables, created when missing. Lower-case identifier, default `ferry`. */
  schema?: string;
  /** Size of the store's own pool (ignored with `pool`). Default 10. */
  poolSize?: number;
  /**
   * Longest wait to open a connection, or for a free one of the store's pool,
   * ms (ignored with `pool`: set the pool's `connectionTimeoutMillis`).
   * Default 10000. A call that waits longer rejects with a transient `IOError`.
   */
  connectTimeoutMs?: number;
  /**
   * The server's `statement_timeout` for the store's connections, ms; 0 for
   * none (ignored with `pool`). The server cancels a statement that runs
   * longer (the call rejects with a transient `IOError`) and ends a session
   * left idle inside a transaction for the longer of this and
   * `queryTimeoutMs`. Default 10000. Migrations run without it.
   */
  statementTimeoutMs?: number;
  /**
   * Longest wait for the server's answer to one statement, ms; 0 for none.
   * Past it the call rejects with a transient `IOError` and the connection is
   * dropped (its answer could otherwise arrive for the next caller). Keep it
   * above `statementTimeoutMs`, so a slow statement is cancelled by the server
   * first, and well below the queue's `leaseDurationMs` (30000 by default),
   * so a heartbeat that cannot reach the server fails while the lease still
   * holds. Applies to a borrowed `pool` too. Default 15000.
   */
  queryTimeoutMs?: number;
  /**
   * How long `close()` lets calls still running end, ms; 0 for not at all.
   * Past it their connections' sockets are destroyed, calls still waiting
   * for a pooled connection are cut off, and all of them reject with
   * `ClosedError` (a statement the server was still running may yet finish
   * there). Default 1000.
   */
  closeGraceMs?: number;
}

/**
 * Begins a transaction whose statements are planned for their values, as
 * the statements that read a topic's messages in publish order need: their
 * generic plan walks every message through the primary key to find those of
 * a small topic beside a large one (25 ms and 4,232 pages for 10 messages
 * beside 300,000, where a plan for the topic's value reads 4 pages).
 * Admin calls and a group's creation, never per delivery.
 */
const BEGIN_CUSTOM_PLANS = 'BEGIN; SET LOCAL plan_cache_mode = force_custom_plan';
/**
 * Begins a transaction that commits without waiting for the WAL flush: for
 * claims only, where a database crash that forgets the commit merely makes
 * the deliveries claimable again (a later synchronous commit, an ack of them
 * included, flushes it first).
 */
const BEGIN_RELAXED = 'BEGIN; SET LOCAL synchronous_commit TO off';

/** Rows of a backfill page (messages read per round trip when a new `earliest` group catches up). */
const BACKFILL_PAGE = 5000;
/**
 * How `removeGroup` gives way to the calls it meets on the group's rows.
 * Its DELETE takes the rows in its plan's order (message order through the
 * topic's messages on a large table, else table order), while an ack,
 * ack-and-claim, extend or release takes the leased rows it names in its
 * own plan's order (primary key, table or lease order) and then, through
 * the lane triggers, the next row of each lane; a janitor purge takes dead
 * rows in its order.
 * So the two can each hold a row the other waits for. In its first
 * `REMOVE_GROUP_YIELDING_TRIES` tries the DELETE waits at most
 * `REMOVE_GROUP_LOCK_WAIT_MS` for any row, well under Postgres's
 * `deadlock_timeout` (1 s by default): `removeGroup` gives up and rolls
 * back before the deadlock detector picks a victim, so the ack goes on,
 * and it tries again after a pause that grows with each try. Later tries
 * wait as long as it takes (a row held that long is not an ack's), and a
 * deadlock the detector breaks there is tried again, up to
 * `REMOVE_GROUP_TRIES` tries in all.
 */
const REMOVE_GROUP_LOCK_WAIT_MS = 250;
const REMOVE_GROUP_YIELDING_TRIES = 5;
const REMOVE_GROUP_TRIES = 8;
/** SQLSTATEs after which `removeGroup` tries again: lock_timeout, deadlock. */
const REMOVE_GROUP_RETRY = new Set(['55P03', '40P01']);

/**
 * How driver and server errors become `IOError`s with the original as
 * `cause`: `transient` says whether a retry can help (by SQLSTATE, see
 * `../transient.ts`).
 */
const SOURCE: IOErrorSource = { name: 'postgres store', withCode: true, transient: postgresTransient, reword: pgTimeoutWording };

const POSTGRES_STORE_OPTION_KEYS = knownKeys<PostgresStoreOptions>({
  connectionString: true,
  pool: true,
  schema: true,
  poolSize: true,
  connectTimeoutMs: true,
  statementTimeoutMs: true,
  queryTimeoutMs: true,
  closeGraceMs: true,
});

/** The error of a call whose `signal` aborted: the queue's close deadline passed. */
function aborted(what: string): ClosedError {
  return new ClosedError(`postgres store: ${what} abandoned: its signal aborted (the queue is closing)`);
}

let driver: Promise<typeof pg> | undefined;

/** Imports `pg` on first use, so importing `ferry/queue` never loads it. */
function loadDriver(): Promise<typeof pg> {
  driver ??= import('pg').then((m) => ((m as { default?: typeof pg }).default ?? (m as unknown as typeof pg)));
  return driver;
}

/**
 * Most payload bytes one append carries: its payloads travel end to end as
 * one bytea parameter of one statement, and Postgres refuses a value (and a
 * protocol message) of 1 GiB or more, by dropping the connection, which
 * reads as a transient error and would be retried for good.
 */
export const MAX_APPEND_PAYLOAD_BYTES = 768 << 20;
/**
 * Largest payload of one message: a claim reads it back as base64 text (a
 * third larger), and a string past V8's limit (2^29 − 24 characters, about
 * 384 MiB of payload) makes the driver throw where nothing can catch it,
 * ending the consumer's process, so such a message could be stored and
 * never delivered.
 */
export const MAX_POSTGRES_PAYLOAD_BYTES = 256 << 20;
/**
 * Largest payload of a schedule: every instance reads the schedules back at
 * start as hex text (twice the size), and past V8's string limit that read
 * throws where nothing can catch it, so one such row would end every
 * process that opens the schema.
 */
export const MAX_POSTGRES_SCHEDULE_PAYLOAD_BYTES = 128 << 20;

/** @throws PayloadTooLargeError a message of `msgs` over {@link MAX_POSTGRES_PAYLOAD_BYTES}, or all of them over {@link MAX_APPEND_PAYLOAD_BYTES}. */
export function checkAppendBytes(msgs: readonly StoredMessage[]): void {
  let n = 0;
  for (const m of msgs) {
    const b = m.payload.byteLength;
    if (b > MAX_POSTGRES_PAYLOAD_BYTES) {
      throw new PayloadTooLargeError(`postgres store: a message's payload is at most ${MAX_POSTGRES_PAYLOAD_BYTES} bytes (it is read back as base64 text), got ${b}`);
    }
    n += b;
  }
  if (n > MAX_APPEND_PAYLOAD_BYTES) {
    throw new PayloadTooLargeError(`postgres store: one publish carries at most ${MAX_APPEND_PAYLOAD_BYTES} bytes of payload (one statement), got ${n}: publish its messages in smaller calls`);
  }
}

/**
 * A `Store` in a Postgres schema (queue type `postgres`), safe to share
 * between any number of instances. Implements `listen` (LISTEN/NOTIFY on a
 * dedicated connection), `acquireJanitor`, the schedule methods,
 * `setGroupPaused`, priorities and rate limits. Use `PostgresStore.open`.
 */
export class PostgresStore implements Store {
  /** Claims order by priority through an index (claim.sql) and count rate limits in the database (claim-budget.sql). */
  readonly capabilities: StoreCapabilities = { priority: true, rateLimit: true, overlappingClaims: true };
  readonly #driver: typeof pg;
  readonly #pool: pg.Pool;
  readonly #ownsPool: boolean;
  readonly #sql: Record<StatementName, string>;
  readonly #channel: string;
  readonly #schema: string;
  readonly #listeners = new Set<() => void>();
  readonly #names = new Map<StatementName, string>();
  readonly #timeouts: PostgresTimeouts;
  /** The PIDs of this store's connections, whose notifications its listener skips (own-notifications.ts). */
  readonly #own: OwnNotifications;
  /** Connections checked out by calls still running (#withClient). */
  readonly #busy = new Set<pg.PoolClient>();
  /** Calls waiting for a pooled connection, each by the function that cuts it off (close()). */
  readonly #waiting = new Set<(err: Error) => void>();
  /** Calls inside #withClient, and what close() runs when the last one ends. */
  #running = 0;
  #idle: (() => void) | undefined;
  /** The groups of topics this store published to, for one-statement appends. */
  readonly #topicGroups = new TopicGroupsCache();
  /** `duePairs`' last frozen pairs and their encoded parameters. */
  #duePairsParams: { pairs: readonly ConsumerGroup[]; values: [string, string] } | undefined;
  /** `listen` calls running. */
  #listenerCount = 0;
  #closed = false;
  /** The running `close()`, which every later call returns. */
  #closing: Promise<void> | undefined;

  private constructor(driverModule: typeof pg, pool: pg.Pool, ownsPool: boolean, schema: string, quoted: string, timeouts: PostgresTimeouts) {
    this.#driver = driverModule;
    this.#pool = pool;
    this.#ownsPool = ownsPool;
    this.#timeouts = timeouts;
    this.#schema = schema;
    this.#sql = statements(quoted);
    this.#channel = wakeChannel(schema);
    this.#own = new OwnNotifications(pool, schema);
  }

  /**
   * Connects, creates the schema when missing and applies pending migrations
   * (under an advisory lock, so instances may start together).
   *
   * When neither the URL nor `PGUSER` names a user (and `$USER` is unset),
   * the store connects as the operating system's login name, as libpq does.
   *
   * @throws InvalidArgumentError neither or both of `connectionString` and `pool`, a `connectionString` pg cannot read (keyword/value), a bad schema name, `poolSize` or timeout.
   * @throws IOError the database is unreachable or refuses the migration (the driver's error is the cause).
   */
  static async open(opts: PostgresStoreOptions): Promise<PostgresStore> {
    rejectUnknownKeys('postgres store option', opts, POSTGRES_STORE_OPTION_KEYS);
    if (opts?.connectionString !== undefined && typeof opts.connectionString !== 'string') throw new InvalidArgumentError('postgres store: connectionString must be a string');
    const hasUrl = typeof opts?.connectionString === 'string' && opts.connectionString !== '';
    if (hasUrl === (opts?.pool !== undefined)) throw new InvalidArgumentError('postgres store needs exactly one of connectionString and pool');
    if (opts.pool !== undefined && typeof (opts.pool as { connect?: unknown } | null)?.connect !== 'function') throw new InvalidArgumentError('postgres store: pool must be a pg.Pool');
    const schema = opts.schema ?? DEFAULT_POSTGRES_SCHEMA;
    const quoted = quoteSchema(schema);
    if (opts.poolSize !== undefined && (!Number.isInteger(opts.poolSize) || opts.poolSize < 1)) {
      throw new InvalidArgumentError('postgres store: poolSize must be a positive integer');
    }
    const timeouts = resolveTimeouts(opts, 'postgres store');
    const Driver = await loadDriver();
    const ownsPool = opts.pool === undefined;
    const pool = opts.pool ?? new Driver.Pool(poolConfig(Driver, opts.connectionString!, opts.poolSize ?? 10, timeouts, POSTGRES_SESSION_OPTIONS));
    if (ownsPool) {
      // An idle client that loses its connection emits on the pool; without a
      // listener that would crash the process. The pool replaces it on next use.
      pool.on('error', () => undefined);
      // A client can also fail (the server ends its session) in the very read
      // that made it ready: the pool has dropped its idle listener and handed
      // it out, and #withClient has not yet added its own. A listener from the
      // client's first moment keeps that from crashing the process; the
      // statement it was wanted for fails, and a publish retries it.
      pool.on('connect', (client) => void client.on('error', () => undefined));
    }
    try {
      await migrate(pool, schema, quoted);
    } catch (err) {
      if (ownsPool) await pool.end().catch(() => undefined);
      throw asIOError(`opening schema ${schema}`, err, SOURCE);
    }
    return new PostgresStore(Driver, pool, ownsPool, schema, quoted, timeouts);
  }

  /** The schema this store uses (unquoted). */
  get schema(): string {
    return this.#schema;
  }

  #assertOpen(): void {
    if (this.#closed) throw new ClosedError('postgres store is closed');
  }

  /**
   * A named prepared statement: each connection parses it once. The name
   * carries a hash of the text, so two versions of a statement (another
   * schema, a later release sharing the pool) never collide on one connection.
   */
  #stmt(name: StatementName, values: unknown[]): pg.QueryConfig {
    let prepared = this.#names.get(name);
    if (prepared === undefined) {
      const text = this.#sql[name];
      prepared = `ferry_${name}_${createHash('sha1').update(text).digest('hex').slice(0, 12)}`;
      this.#names.set(name, prepared);
    }
    return this.#timed({ name: prepared, text: this.#sql[name], values });
  }

  /** `q` with the client-side answer timeout (so a borrowed pool has it too). */
  #timed(q: pg.QueryConfig): pg.QueryConfig {
    if (this.#timeouts.queryTimeoutMs > 0) (q as { query_timeout?: number }).query_timeout = this.#timeouts.queryTimeoutMs;
    return q;
  }

  /** One statement on a pooled connection. */
  async #q<R extends pg.QueryResultRow>(name: StatementName, values: unknown[], signal?: AbortSignal): Promise<pg.QueryResult<R>> {
    return this.#withClient(name, signal, (c) => c.query<R>(this.#stmt(name, values)));
  }

  /**
   * Runs `fn` on a pooled connection. When `signal` aborts first the call
   * rejects at once with `ClosedError` and the connection's socket is
   * destroyed at once: releasing it with an error would only end it politely,
   * and a server still waiting in its statement (on a lock, say) reads
   * nothing until the statement ends, so the socket, and the process with
   * it, stayed open until then. A connection whose statement failed other
   * than by the server's answer (a timeout, a dropped socket) is destroyed
   * too, never handed to the next caller.
   */
  async #withClient<T>(what: string, signal: AbortSignal | undefined, fn: (c: pg.PoolClient) => Promise<T>, onServerError?: (c: pg.PoolClient) => Promise<void>): Promise<T> {
    this.#assertOpen();
    if (signal?.aborted) throw aborted(what);
    let onAbort: (() => void) | undefined;
    const abort = signal
      ? new Promise<never>((_, reject) => {
          onAbort = () => reject(aborted(what));
          signal.addEventListener('abort', onAbort, { once: true });
        })
      : undefined;
    abort?.catch(() => undefined);
    let client: pg.PoolClient | undefined;
    let released = false;
    // A socket error while checked out between two statements is emitted on
    // the client, where nothing else listens: the next statement fails instead.
    const ignore = () => undefined;
    const release = (err?: Error) => {
      if (released || client === undefined) return;
      released = true;
      this.#busy.delete(client);
      client.release(err);
      client.removeListener('error', ignore);
    };
    this.#running++;
    try {
      const connecting = this.#pool.connect();
      // close() cuts a call still waiting here once its grace ends: the pool
      // serves no waiter once it is ending, and the call would hang until
      // connectTimeoutMs, or for good once nothing else kept the process up.
      let cut!: (err: Error) => void;
      const cutting = new Promise<never>((_, reject) => (cut = reject));
      this.#waiting.add(cut);
      try {
        client = await Promise.race(abort ? [connecting, abort, cutting] : [connecting, cutting]);
      } catch (err) {
        // A connection that arrives after the abort or the cut goes straight back.
        void connecting.then((c) => c.release(), () => undefined);
        throw err;
      } finally {
        this.#waiting.delete(cut);
      }
      client.on('error', ignore);
      this.#own.checkedOut(client);
      const running = fn(client);
      running.catch(() => undefined);
      this.#busy.add(client);
      try {
        const out = await (abort ? Promise.race([running, abort]) : running);
        release();
        return out;
      } catch (err) {
        if (err instanceof ClosedError || !(err instanceof this.#driver.DatabaseError)) {
          // Aborted, timed out, or the socket failed: the connection's state is unknown.
          if (err instanceof ClosedError) destroySocket(client);
          release(err instanceof Error ? err : new Error(String(err)));
        } else {
          let broken: Error | undefined;
          if (onServerError) await onServerError(client).catch((e: Error) => (broken = e));
          release(broken);
        }
        throw err;
      }
    } catch (err) {
      // Cut off by close() (below): the call was given up, as an aborted one is.
      if (this.#closed && !(err instanceof ClosedError)) throw new ClosedError(`postgres store: ${what} abandoned: the store closed`, { cause: err });
      throw asIOError(what, err, SOURCE);
    } finally {
      if (onAbort) signal!.removeEventListener('abort', onAbort);
      if (--this.#running === 0) this.#idle?.();
    }
  }

  /**
   * Runs `fn` in a transaction on one pooled connection, begun by `begin`
   * (`BEGIN`, or one of `BEGIN_CUSTOM_PLANS`, `BEGIN_RELAXED`). A transaction
   * the server refused is rolled back; one cut short otherwise (abort,
   * timeout, dropped socket) goes with its connection.
   */
  async #tx<T>(what: string, fn: (c: pg.PoolClient) => Promise<T>, begin = 'BEGIN', signal?: AbortSignal): Promise<T> {
    return this.#withClient(
      what,
      signal,
      async (client) => {
        await client.query(this.#timed({ text: begin }));
        const out = await fn(client);
        await client.query(this.#timed({ text: 'COMMIT' }));
        return out;
      },
      async (client) => {
        await client.query(this.#timed({ text: 'ROLLBACK' }));
      },
    );
  }

  async ensureGroup(topic: string, group: string, startFrom: StartFrom): Promise<void> {
    try {
      await this.#ensureGroup(topic, group, startFrom);
    } finally {
      // A new group changed the topic's groups_version: the next append reads the groups at once (not after a refused statement).
      this.#topicGroups.forget([topic]);
    }
  }

  async #ensureGroup(topic: string, group: string, startFrom: StartFrom): Promise<void> {
    await this.#tx('ensureGroup', async (c) => {
      await c.query(this.#stmt('lock-topics', [[topic]]));
      const created = await c.query(this.#stmt('create-group', [topic, group]));
      if (created.rowCount === 0 || startFrom !== 'earliest') return;
      // The topic's lock keeps appends out until this commits, so the pages
      // below see every message committed before the group existed.
      for (let after = '0'; ; ) {
        const page = await c.query<{ seq: string; id: string }>(this.#stmt('backfill-page', [topic, after, BACKFILL_PAGE]));
        if (page.rows.length === 0) break;
        await c.query(this.#stmt('backfill', [topic, group, page.rows.map((r) => r.seq), page.rows.map((r) => deliveryId(r.id, group))]));
        after = page.rows[page.rows.length - 1]!.seq;
        if (page.rows.length < BACKFILL_PAGE) break;
      }
    }, BEGIN_CUSTOM_PLANS);
  }

  /**
   * One statement (append.sql, one round trip and one commit) when this
   * store remembers the groups of every topic of `msgs` at their current
   * `groups_version`; otherwise, or when a group was registered or removed
   * since, a transaction that locks the topics, reads their groups (and
   * remembers them) and runs the same statement.
   */
  async append(msgs: StoredMessage[]): Promise<void> {
    if (msgs.length === 0) return this.#assertOpen();
    checkAppendBytes(msgs);
    const topics = [...new Set(msgs.map((m) => m.topic))].sort();
    const known = this.#topicGroups.lookup(topics);
    if (known !== undefined) {
      const res = await this.#q<{ ok: boolean }>('append', appendValues(msgs, topics, known, this.#channel));
      if (res.rows[0]!.ok) return;
      this.#topicGroups.forget(topics);
    }
    await this.#tx('append', async (c) => {
      await c.query(this.#stmt('lock-topics', [topics]));
      const groups = this.#topicGroups.remember((await c.query<GroupsOfRow>(this.#stmt('groups-of', [topics]))).rows);
      // Under the locks the versions just read are current: this stores.
      const res = await c.query<{ ok: boolean }>(this.#stmt('append', appendValues(msgs, topics, groups, this.#channel)));
      if (!res.rows[0]!.ok) throw new IOError(`postgres store: append found a topic's groups_version changed under its own lock (topics ${topics.join(', ')})`, { transient: false });
    });
  }

  /**
   * Each call below takes an optional last `signal`: when it aborts the call
   * rejects at once with `ClosedError` and its connection is destroyed, so
   * the server ends the statement (a transaction rolls back). A call that
   * gets no answer within `queryTimeoutMs` rejects with a transient `IOError`.
   */
  async claim(req: ClaimRequest, signal?: AbortSignal): Promise<Claimed[]> {
    const limited = req.rateLimit !== undefined;
    const values = (limit: number) => [req.topic, req.group, limit, req.runnerId, Math.ceil(req.leaseMs), limited];
    let rows: ClaimRow[];
    let wait: number | undefined;
    if (req.maxInFlight > 0 || limited) {
      // The group's row lock serialises its capped claims across instances:
      // the counts below are then the committed ones (claim-lock-group.sql).
      rows = await this.#tx('claim', async (c) => {
        const group = (await c.query<{ paused: boolean }>(this.#stmt('claim-lock-group', [req.topic, req.group]))).rows[0];
        if (group?.paused === true) return [];
        const interval = limited ? req.rateLimit!.intervalMs : null;
        const budget = claimLimit(req, (await c.query<BudgetRow>(this.#stmt('claim-budget', [req.topic, req.group, req.maxInFlight, interval]))).rows[0]!);
        const got = budget.limit > 0 ? (await c.query<ClaimRow>(this.#stmt('claim', values(budget.limit)))).rows : [];
        wait = budget.rateWait(got.length);
        return got;
      }, BEGIN_RELAXED, signal);
    } else {
      rows = (await this.#q<ClaimRow>('claim', values(req.max), signal)).rows;
    }
    if (wait !== undefined) req.onRateLimited?.(wait);
    return rows.map((r) => toClaimed(r, req.group));
  }

  /**
   * See `Store.ackAndClaim`. When the claim cannot depend on the acks (no
   * keyed ack, no `maxInFlight`, no rate limit), `ack` and `claim` run side
   * by side on two connections, so the claim (relaxed commit) does not wait
   * for the acks' WAL flush; a claim that fails after its acks landed
   * reports them with nothing claimed, and an ack that fails gives the
   * claim's deliveries back before rejecting. Otherwise, without
   * `maxInFlight` or a rate limit, one statement (ack-and-claim.sql): one
   * round trip, one commit. With them, the acks, the group's lock, its budget
   * and the claim in one transaction, so the budget counts the leases the
   * acks ended; its commit is synchronous.
   */
  async ackAndClaim(acks: Claimed[], req: ClaimRequest, signal?: AbortSignal): Promise<AckAndClaimed> {
    if (acks.length === 0) return { acked: [], claimed: await this.claim(req, signal) };
    const limited = req.rateLimit !== undefined;
    if (req.maxInFlight === 0 && !limited && acks.every((a) => a.message.key === undefined)) return this.#ackBesideClaim(acks, req, signal);
    const [seqs, tokens] = seqsAndTokens(acks);
    if (req.maxInFlight === 0 && !limited) {
      const rows = (await this.#q<ClaimRow & { kind: number }>('ack-and-claim', [req.topic, req.group, req.max, req.runnerId, Math.ceil(req.leaseMs), false, seqs, tokens, this.#channel], signal)).rows;
      const held = rows.filter((r) => r.kind === 1).map((r) => ({ delivery_id: r.delivery_id, token: r.claim_token }));
      return { acked: stillHeld(acks, held), claimed: rows.filter((r) => r.kind === 0).map((r) => toClaimed(r, req.group)) };
    }
    let wait: number | undefined;
    const out = await this.#withClient(
      'ackAndClaim',
      signal,
      async (c) => {
        await c.query(this.#timed({ text: 'BEGIN' }));
        const held = (await c.query<HeldRow>(this.#stmt('ack', [seqs, tokens, this.#channel]))).rows;
        let rows: ClaimRow[] = [];
        const group = (await c.query<{ paused: boolean }>(this.#stmt('claim-lock-group', [req.topic, req.group]))).rows[0];
        if (group?.paused !== true) {
          const interval = limited ? req.rateLimit!.intervalMs : null;
          const budget = claimLimit(req, (await c.query<BudgetRow>(this.#stmt('claim-budget', [req.topic, req.group, req.maxInFlight, interval]))).rows[0]!);
          if (budget.limit > 0) rows = (await c.query<ClaimRow>(this.#stmt('claim', [req.topic, req.group, budget.limit, req.runnerId, Math.ceil(req.leaseMs), limited]))).rows;
          wait = budget.rateWait(rows.length);
        }
        // claim.sql relaxes its transaction's commit; this one carries acks.
        await c.query(this.#timed({ text: 'SET LOCAL synchronous_commit TO on; COMMIT' }));
        return { acked: stillHeld(acks, held), claimed: rows.map((r) => toClaimed(r, req.group)) };
      },
      async (c) => {
        await c.query(this.#timed({ text: 'ROLLBACK' }));
      },
    );
    if (wait !== undefined) req.onRateLimited?.(wait);
    return out;
  }

  /**
   * `ack(acks)` and `claim(req)` at once, for `ackAndClaim` when neither
   * depends on the other. One case makes them meet: an ack whose lease ran
   * out, which the claim may take back (as recovered) before the ack lands,
   * so that the ack finds it no longer held. Its handler succeeded and this
   * call now holds it, so it is acked under the new claim, as if the ack had
   * gone first, rather than handed out to run again.
   */
  async #ackBesideClaim(acks: Claimed[], req: ClaimRequest, signal?: AbortSignal): Promise<AckAndClaimed> {
    const [acked, claimed] = await Promise.allSettled([this.ack(acks, signal), this.claim(req, signal)]);
    if (acked.status === 'rejected') {
      if (claimed.status === 'fulfilled') await this.release(claimed.value, signal).catch(() => undefined); // else their leases run out
      throw acked.reason;
    }
    if (claimed.status === 'rejected') return { acked: acked.value, claimed: [] };
    // Taken back from this very ack: recovered (its lease ran out) with the
    // next attempt number, so nobody claimed it in between. A delivery given
    // back (released) and claimed afresh is not: its ack stays missed.
    const acking = new Map(acks.map((a) => [a.deliveryId, a.attempt]));
    const isRetaken = (c: Claimed) => c.recovered === true && acking.get(c.deliveryId) === c.attempt - 1;
    const retaken = claimed.value.filter(isRetaken);
    if (retaken.length === 0) return { acked: acked.value, claimed: claimed.value };
    const rest = claimed.value.filter((c) => !isRetaken(c));
    // The first acks stand either way. Should this one fail, the delivery is
    // reported not acked (its ack did not land), given back, and runs again.
    const again = await this.ack(retaken, signal).catch(async () => {
      await this.release(retaken, signal).catch(() => undefined); // else its new lease runs out
      return [];
    });
    return { acked: [...acked.value, ...again], claimed: rest };
  }

  /** See `Store.duePairs` (due-pairs.sql): one statement for all the pairs. */
  async duePairs(pairs: readonly ConsumerGroup[], signal?: AbortSignal): Promise<ConsumerGroup[]> {
    if (pairs.length === 0) return (this.#assertOpen(), []);
    // The poller passes the same frozen array while its pairs stay the same:
    // the two array parameters are encoded once, not on every tick.
    let params = this.#duePairsParams;
    if (params?.pairs !== pairs) {
      params = { pairs, values: [arrayLiteral(pairs.map((p) => p.topic)), arrayLiteral(pairs.map((p) => p.group))] };
      if (Object.isFrozen(pairs)) this.#duePairsParams = params;
    }
    const res = await this.#q<ConsumerGroup>('due-pairs', params.values, signal);
    return res.rows;
  }

  async ack(cs: Claimed[], signal?: AbortSignal): Promise<string[]> {
    if (cs.length === 0) return (this.#assertOpen(), []);
    const res = await this.#q<HeldRow>('ack', [...seqsAndTokens(cs), this.#channel], signal);
    return stillHeld(cs, res.rows);
  }

  async retry(c: Claimed, backoffMs: number, lastError: string, signal?: AbortSignal): Promise<boolean> {
    const [seq, token] = splitToken(c.claimToken) ?? [null, null];
    return (await this.#q('retry', [seq, token, Math.ceil(backoffMs), lastError], signal)).rowCount === 1;
  }

  async kill(c: Claimed, lastError: string, opts?: KillOptions, signal?: AbortSignal): Promise<boolean> {
    const [seq, token] = splitToken(c.claimToken) ?? [null, null];
    return (await this.#q('kill', [seq, token, lastError, this.#channel, opts?.unrun ? 1 : 0], signal)).rowCount === 1;
  }

  async extend(cs: Claimed[], leaseMs: number, signal?: AbortSignal): Promise<string[]> {
    if (cs.length === 0) return (this.#assertOpen(), []);
    const res = await this.#q<HeldRow>('extend', [...seqsAndTokens(cs), Math.ceil(leaseMs)], signal);
    return stillHeld(cs, res.rows);
  }

  async release(cs: Claimed[], signal?: AbortSignal): Promise<void> {
    if (cs.length === 0) return this.#assertOpen();
    await this.#q('release', [...seqsAndTokens(cs), this.#channel], signal);
  }

  async purge(policy: PurgePolicy, batch: number, signal?: AbortSignal): Promise<number> {
    // Two statements, dead rows first: a message whose dead row goes now may
    // then be finished, and the second statement's snapshot sees that.
    const dead = await this.#q('purge-dead', [Math.floor(policy.deadRetentionMs), batch], signal);
    const retention = Math.floor(policy.ackedRetentionMs);
    // Chosen and locked, then deleted in a newer snapshot that sees any
    // delivery a backfill committed in between (migration 10).
    const messages = await this.#tx('purge', async (c) => {
      const victims = await c.query<{ seq: string }>(this.#stmt('purge-victims', [retention, batch]));
      if (victims.rows.length === 0) return 0;
      return (await c.query<{ n: number }>(this.#stmt('purge-messages', [victims.rows.map((r) => r.seq), retention]))).rows[0]!.n;
    }, 'BEGIN', signal);
    // Then the records of acks the retention no longer needs (not counted: no message or delivery).
    await this.#q('purge-acked-spans', [retention, batch], signal);
    return (dead.rowCount ?? 0) + messages;
  }

  async stats(topic: string, group: string, signal?: AbortSignal): Promise<StoreStats> {
    const r = (await this.#q<{ live: number; leased: number; dead: number; oldest_ms: number; paused: boolean }>('stats', [topic, group], signal)).rows[0]!;
    return { pending: r.live - r.leased, leased: r.leased, dead: r.dead, oldestPendingAgeMs: r.oldest_ms, paused: r.paused };
  }

  /**
   * See `Store.setGroupPaused` (set-group-paused.sql): the flag on the
   * group's row, read by every instance's next claim and poll. A resume
   * notifies the topic on this schema's wake channel, so other instances'
   * subscriptions claim at once.
   */
  async setGroupPaused(topic: string, group: string, paused: boolean, signal?: AbortSignal): Promise<boolean> {
    return (await this.#q('set-group-paused', [topic, group, paused, this.#channel], signal)).rowCount === 1;
  }

  async ping(signal?: AbortSignal): Promise<void> {
    await this.#withClient('ping', signal, (c) => c.query(this.#timed({ text: 'SELECT 1' })));
  }

  async removeGroup(topic: string, group: string): Promise<boolean> {
    try {
      return await this.#removeGroup(topic, group);
    } finally {
      this.#topicGroups.forget([topic]);
    }
  }

  async #removeGroup(topic: string, group: string): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#tx('removeGroup', async (c) => {
          await c.query(this.#stmt('lock-topics', [[topic]]));
          if (attempt <= REMOVE_GROUP_YIELDING_TRIES) await c.query(this.#timed({ text: `SET LOCAL lock_timeout = ${REMOVE_GROUP_LOCK_WAIT_MS}` }));
          return (await c.query<{ groups: number }>(this.#stmt('remove-group', [topic, group]))).rows[0]!.groups === 1;
        }, BEGIN_CUSTOM_PLANS);
      } catch (err) {
        const code = (err as { cause?: { code?: string } }).cause?.code;
        if (code === undefined || !REMOVE_GROUP_RETRY.has(code) || attempt >= REMOVE_GROUP_TRIES) throw err;
        await new Promise((resolve) => setTimeout(resolve, attempt * 20 * (0.5 + Math.random())));
      }
    }
  }

  async listGroups(topic?: string): Promise<ConsumerGroup[]> {
    const res = await this.#tx('listGroups', (c) => c.query<ConsumerGroup>(this.#stmt('list-groups', [topic ?? null])), BEGIN_CUSTOM_PLANS);
    return res.rows.map((r) => ({ topic: r.topic, group: r.group }));
  }

  async listMessages(topic: string, page: { after?: string; limit: number }): Promise<MessagePage> {
    // One row more than asked tells whether another page follows.
    const values = [topic, String(parseSeqCursor(page.after)), page.limit + 1];
    const rows = (await this.#tx('listMessages', (c) => c.query<ClaimRow & { seq: string }>(this.#stmt('list-messages', values)), BEGIN_CUSTOM_PLANS)).rows;
    const more = rows.length > page.limit;
    if (more) rows.pop();
    const out: MessagePage = { messages: rows.map(toMessage) };
    if (more) out.next = rows[rows.length - 1]!.seq;
    return out;
  }

  /**
   * See `Store.putSchedule` (put-schedule.sql).
   * @throws PayloadTooLargeError a payload over {@link MAX_POSTGRES_SCHEDULE_PAYLOAD_BYTES}.
   */
  async putSchedule(r: ScheduleRecord, signal?: AbortSignal): Promise<boolean> {
    const b = r.payload.byteLength;
    if (b > MAX_POSTGRES_SCHEDULE_PAYLOAD_BYTES) {
      throw new PayloadTooLargeError(`postgres store: a schedule's payload is at most ${MAX_POSTGRES_SCHEDULE_PAYLOAD_BYTES} bytes (it is read back as hex text), got ${b}`);
    }
    return (await this.#q('put-schedule', scheduleValues(r), signal)).rowCount === 1;
  }

  async deleteSchedule(name: string, signal?: AbortSignal): Promise<boolean> {
    return (await this.#q('delete-schedule', [name], signal)).rowCount === 1;
  }

  async listSchedules(signal?: AbortSignal): Promise<ScheduleRecord[]> {
    return (await this.#q<ScheduleRow>('list-schedules', [], signal)).rows.map(scheduleFromRow);
  }

  /** See `Store.advanceSchedule` (advance-schedule.sql). */
  async advanceSchedule(name: string, revision: string, tick: Date, signal?: AbortSignal): Promise<boolean> {
    return (await this.#q<{ held: boolean }>('advance-schedule', [name, revision, tick], signal)).rows[0]!.held;
  }

  async acquireJanitor(holder: string, ttlMs: number): Promise<boolean> {
    return (await this.#q('janitor', [holder, Math.ceil(ttlMs)])).rowCount === 1;
  }

  /**
   * Calls `wake(topic)` for every notification on this schema's channel
   * (sent by publishes, by acks and kills that free a key lane, by releases
   * and by resumes, in any instance) until `signal` aborts or the store closes. Uses a dedicated
   * connection outside the pool; when it drops, reconnects with a doubling
   * delay and wakes every topic it had heard of, since notifications sent
   * while it was away are lost. Every `queryTimeoutMs` it sends `SELECT 1`
   * on that connection: a server that stops answering (a frozen or partitioned
   * network sends no error) counts as a drop. Never rejects.
   */
  async listen(signal: AbortSignal, wake: (topic: string) => void): Promise<void> {
    const heard = new Set<string>();
    const onNotify = (n: pg.Notification) => {
      if (n.channel !== this.#channel || !n.payload) return;
      if (heard.size < 10_000) heard.add(n.payload);
      // This store's own notification (a publish, a lane-freeing ack or kill,
      // a release, a resume): the queue woke its subscriptions when the call
      // returned, and the echo would cost them an empty claim. Only with one
      // listener: a second queue on this store did not see the call.
      if (this.#listenerCount === 1 && this.#own.isOwn(n.processId)) return;
      wake(n.payload);
    };
    this.#listenerCount++;
    try {
      const target = {
        client: () => new this.#driver.Client(this.#clientConfig()),
        channel: this.#channel,
        queryTimeoutMs: this.#timeouts.queryTimeoutMs,
        closed: () => this.#closed,
        stops: this.#listeners,
      };
      await listenLoop(target, signal, onNotify, heard, wake);
    } finally {
      this.#listenerCount--;
    }
  }

  /** Connection settings for the listener: the pool's own. */
  #clientConfig(): pg.ClientConfig {
    const options = (this.#pool as unknown as { options: pg.ClientConfig }).options;
    return { ...options, connectionTimeoutMillis: options.connectionTimeoutMillis || this.#timeouts.connectTimeoutMs };
  }

  /**
   * Stops listeners and ends the pool when the store opened it; a borrowed
   * pool stays open. Calls still running get `closeGraceMs` to end; then
   * their connections' sockets are destroyed, calls still waiting for a
   * pooled connection are cut off, and all of them reject with
   * `ClosedError`. (The engine closes its store last, once its own calls
   * ended or were given up at its deadline.) Ending such a connection
   * politely would wait for a server that reads nothing until its statement
   * ends, on a lock say, and keep the process alive until then. Idempotent:
   * a call made while another runs resolves when that one does.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    for (const stop of this.#listeners) stop();
    if (this.#running > 0) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.#idle = resolve;
        timer = setTimeout(resolve, this.#timeouts.closeGraceMs);
      });
      clearTimeout(timer);
      this.#idle = undefined;
      for (const client of this.#busy) destroySocket(client);
      for (const cut of this.#waiting) cut(new ClosedError('postgres store: a call waiting for a connection was abandoned: the store closed'));
    }
    if (this.#ownsPool) this.#dropConnecting();
    this.#own.close();
    if (this.#ownsPool) await this.#pool.end().catch(() => undefined);
  }

  /**
   * Destroys the sockets of connections the pool is still opening, for calls
   * close() cut or that were aborted: pool.end() waits for each of them to
   * connect or to reach connectTimeoutMs, which on a server slow to accept
   * held close (and the process) that long. Reads pg-pool's own lists: every
   * client of the pool that is not idle, once no call holds one.
   */
  #dropConnecting(): void {
    const pool = this.#pool as unknown as { _clients?: pg.Client[]; _idle?: Array<{ client: pg.Client }> };
    if (!Array.isArray(pool._clients) || !Array.isArray(pool._idle)) return;
    const idle = new Set(pool._idle.map((i) => i.client));
    for (const client of pool._clients) if (!idle.has(client)) destroySocket(client);
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
