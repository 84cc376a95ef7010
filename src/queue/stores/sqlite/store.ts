/**
 * The SQLite store (queue type `sqlite`), the embedded default: one file, one
 * process, better-sqlite3 loaded only when this store is opened.
 *
 * Rows (schema.sql): `ferry_groups` (topic, group, its cursor and pause
 * flag), `ferry_messages` (one per message; its `seq` is publish order),
 * `ferry_deliveries` (one per message and group, keyed by (message_seq, grp)
 * and carrying its `deliveryId`), `ferry_claim_starts` (what rate limits
 * count), `ferry_schedules` (one per schedule) and `ferry_seq_marks` (how
 * far the janitor's walk reaches). A publish writes only the
 * message; a claim makes the deliveries of the messages past its group's
 * cursor as it looks for due ones, in priority order (claim.ts). A
 * delivery's `state` is a code of ../delivery-state.ts; partial indexes over
 * live rows keep claims proportional to live work however many finished rows
 * wait for the janitor. Each statement is a `.sql` file beside this one
 * (sql.ts).
 *
 * Times are integers of milliseconds on the database's clock (now.sql); the
 * engine passes only durations. Every write transaction is `BEGIN IMMEDIATE`;
 * one that keeps a time reads the clock after taking the write lock, so a
 * lease never starts before the claim could be made (an append keeps none). WAL journal mode; `synchronous` is FULL by
 * default, so a committed publish or ack survives a power cut, not only a
 * process crash.
 */
import { EventEmitter } from 'node:events';
import { closeSync, constants, openSync, realpathSync } from 'node:fs';
import type BetterSqlite3 from 'better-sqlite3';
import { ClosedError, InvalidArgumentError, IOError, PayloadTooLargeError } from '../../../errors.js';
import { sqliteTransient } from '../transient.js';
import { parseSeqCursor } from '../seq-cursor.js';
import { setUpSchema } from './migrate.js';
import { claimStep, type ClaimStep } from './claim.js';
import { toMessage, type MessageRowDb } from './rows.js';
import { SqliteDuePairs } from './due-pairs.js';
import { prepareStatements, type Statements } from './sql.js';
import { scheduleFromRow, scheduleValues, type ScheduleRow } from './schedule-rows.js';
import type { ScheduleRecord } from '../../schedules/types.js';
import type {
  AckAndClaimed, ClaimRequest, Claimed, ConsumerGroup, KillOptions, MessagePage, PurgePolicy, StartFrom, Store, StoreCapabilities, StoreStats, StoredMessage,
} from '../../types.js';
import { knownKeys, rejectUnknownKeys } from '../../../known-keys.js';
import { shown } from '../../../show-value.js';
import { assertRegularFile, assertRegularIfPresent, notRegularFileError } from '../../../regular-file.js';
import { MAX_TIMER_MS } from '../../options.js';

type Database = BetterSqlite3.Database;

/** Options of `SqliteStore.open`. */
export interface SqliteStoreOptions {
  /**
   * Database file; created with its tables when missing, mode 0600 (the
   * umask still applies), and SQLite gives its `-wal` and `-shm` files the
   * same mode. An existing file keeps its mode. `:memory:` works for a
   * throwaway store.
   */
  path: string;
  /** SQLite `synchronous` pragma: `full` (default) survives power loss; `normal` only process crashes, and is faster. */
  synchronous?: 'full' | 'normal';
  /** How long a write waits for another connection's lock, ms. Default 5000. */
  busyTimeoutMs?: number;
}

const SQLITE_STORE_OPTION_KEYS = knownKeys<SqliteStoreOptions>({ path: true, synchronous: true, busyTimeoutMs: true });

/**
 * Page size of a database file the store creates, bytes. SQLite's default:
 * a one-message publish dirties about four pages (the message's table page
 * and three index pages) whatever their size, and each is written to the WAL
 * whole, so smaller pages write fewer bytes per commit (bench
 * `sqlite-pages`). An existing file keeps the page size it was made with.
 */
export const PAGE_SIZE = 4096;

/** Mode of a database file the store creates; SQLite copies it to the `-wal` and `-shm` files. */
const DATABASE_FILE_MODE = 0o600;

/**
 * Creates the database file at `path` with mode 0600 unless it exists, so
 * SQLite never creates it with its default 0644. `:memory:`, `''` (a
 * temporary database) and `file:` URIs are left to SQLite.
 */
function createPrivate(path: string): void {
  if (path === ':memory:' || path.startsWith('file:')) return;
  // SQLite's own files beside it first (nothing is made when one is refused): a FIFO or directory there failed later as a transient I/O error, or a misleading one.
  for (const side of SIDE_FILES) assertRegularIfPresent(path + side);
  // Non-blocking: a FIFO under the name would hold open(2), and the whole event loop, until a writer came.
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_CREAT | constants.O_NONBLOCK, DATABASE_FILE_MODE);
  } catch (err) {
    throw notRegularFileError(path, err) ?? err;
  }
  try {
    assertRegularFile(fd, path);
  } finally {
    closeSync(fd);
  }
}

/** The files SQLite keeps beside a database in WAL mode (and the rollback journal of its first transaction). */
const SIDE_FILES = ['-wal', '-shm', '-journal'];

/** Errors of opening a path that a retry does not mend: it is missing, not a file, or not ours to open. */
const PERMANENT_OPEN_ERRORS = new Set(['ENOENT', 'ENOTDIR', 'EISDIR', 'EACCES', 'EPERM', 'EROFS', 'ELOOP', 'ENAMETOOLONG', 'ENXIO', 'EFTYPE']);

/**
 * Whether a failure to open or set up the database may pass: not for a path
 * that cannot be opened (above), a file that is not a database or is
 * corrupt (`sqliteTransient`), or a schema from a newer ferry (its own
 * `IOError` says so); yes for a busy or locked one.
 */
function openTransient(err: unknown): boolean {
  if (err instanceof IOError) return err.transient;
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && PERMANENT_OPEN_ERRORS.has(code)) return false;
  return sqliteTransient(err);
}

/** The parameters that fence a write on claim `c` (ack.sql): its message's ID, its group and its claim token. */
const fence = (c: Claimed): { id: string; grp: string; token: string } => ({ id: c.message.id, grp: c.group, token: c.claimToken });

/** What ack.sql and kill.sql return for the row they finished. */
interface FinishedRow {
  topic: string;
  msg_key: string | null;
}

let driver: Promise<typeof BetterSqlite3> | undefined;

/**
 * Wake-ups between handles on one database file in this process: the event
 * name is the file's real path, the arguments the topic and the handle that
 * wrote. Other processes on the file are not told (they poll).
 */
const fileEvents = new EventEmitter().setMaxListeners(0);

/** Imports better-sqlite3 on first use, so importing `ferry/queue` never loads the native module. */
function loadDriver(): Promise<typeof BetterSqlite3> {
  driver ??= import('better-sqlite3').then((m) => (m as { default: typeof BetterSqlite3 }).default);
  return driver;
}

/**
 * A `Store` in one SQLite file (queue type `sqlite`). Single process: other
 * processes may open the same file in turn (a restarted consumer finishes
 * what a killed one left), but its wake source (`listen`) reaches only the
 * handles on the same file in this process.
 * Use `SqliteStore.open`.
 */
export class SqliteStore implements Store {
  readonly #db: Database;
  readonly #q: Statements;
  /** The file's real path, the channel of `fileEvents`; undefined for a private (`:memory:` or temporary) database. */
  readonly #file: string | undefined;
  /** One transaction function for every write that reads the clock (better-sqlite3 builds five wrappers per `transaction` call). */
  readonly #tx: BetterSqlite3.Transaction<(fn: (now: number) => unknown) => unknown>;
  /** The same for a write that needs no clock (append): one statement fewer per commit. */
  readonly #txNoClock: BetterSqlite3.Transaction<(fn: () => unknown) => unknown>;
  #closed = false;
  /** Claims order by `Message.priority` through the live index, and count `ClaimRequest.rateLimit` (claim.ts). */
  readonly capabilities: StoreCapabilities = { priority: true, rateLimit: true };
  /** The poll query, prepared on first use (due-pairs.ts). */
  #due: SqliteDuePairs | undefined;
  /** How many of `fileEvents`' listeners on this file are this handle's own (`listen`), which its `#notify` need not reach. */
  #listening = 0;

  private constructor(db: Database, file: string | undefined) {
    this.#db = db;
    this.#q = prepareStatements(db);
    this.#file = file;
    this.#tx = db.transaction((fn: (now: number) => unknown) => fn(this.#q.now.get() as number));
    this.#txNoClock = db.transaction((fn: () => unknown) => fn());
  }

  /**
   * Opens (creating when missing) the database at `opts.path`, in WAL mode.
   *
   * @throws InvalidArgumentError no path, an unknown option, a `synchronous` other than 'full' or 'normal', or a `busyTimeoutMs` that is not an integer from 0 to 2^31−1.
   * @throws IOError the database cannot be opened or set up (the driver's error is the cause).
   */
  static async open(opts: SqliteStoreOptions): Promise<SqliteStore> {
    rejectUnknownKeys('sqlite store option', opts, SQLITE_STORE_OPTION_KEYS);
    if (typeof opts?.path !== 'string' || opts.path === '') throw new InvalidArgumentError('sqlite store needs a path');
    if (opts.synchronous !== undefined && opts.synchronous !== 'full' && opts.synchronous !== 'normal') {
      throw new InvalidArgumentError(`sqlite store: synchronous must be 'full' or 'normal', got ${shown(opts.synchronous)}`);
    }
    const busy = opts.busyTimeoutMs;
    if (busy !== undefined && (!Number.isInteger(busy) || busy < 0 || busy > MAX_TIMER_MS)) {
      throw new InvalidArgumentError(`sqlite store: busyTimeoutMs must be an integer from 0 to ${MAX_TIMER_MS}, got ${shown(busy)}`);
    }
    const Driver = await loadDriver();
    let db: Database;
    try {
      createPrivate(opts.path);
      db = new Driver(opts.path, { timeout: opts.busyTimeoutMs ?? 5000 });
    } catch (err) {
      throw new IOError(`cannot open SQLite database ${opts.path}: ${(err as Error).message}`, { cause: err, transient: openTransient(err) });
    }
    try {
      // Only a new, empty file takes it (before WAL mode).
      db.pragma(`page_size = ${PAGE_SIZE}`);
      db.pragma('journal_mode = WAL');
      db.pragma(`synchronous = ${opts.synchronous === 'normal' ? 'NORMAL' : 'FULL'}`);
      setUpSchema(db);
      const file = db.memory || opts.path === '' ? undefined : realpathSync(opts.path);
      return new SqliteStore(db, file);
    } catch (err) {
      db.close();
      throw new IOError(`cannot set up SQLite database ${opts.path}: ${(err as Error).message}`, { cause: err, transient: openTransient(err) });
    }
  }

  /** The `journal_mode` pragma, for checks. */
  get journalMode(): string {
    return String(this.#db.pragma('journal_mode', { simple: true }));
  }

  /**
   * Runs `fn` in a `BEGIN IMMEDIATE` transaction and hands it the database
   * clock read after the lock was taken. A SQLite error becomes an `IOError`
   * (the driver's error its cause) whose `transient` says whether a retry can
   * help: true for a busy or locked database, false for a read-only, full or
   * corrupt one or a constraint (see `./transient.ts`).
   */
  #write<T>(fn: (now: number) => T): T {
    return this.#inWrite(() => this.#tx.immediate(fn) as T);
  }

  /** `#write` for a transaction that needs no clock. */
  #writeNoClock<T>(fn: () => T): T {
    return this.#inWrite(() => this.#txNoClock.immediate(fn) as T);
  }

  /** Runs `run` (one of the transaction functions), with `#write`'s errors. */
  #inWrite<T>(run: () => T): T {
    if (this.#closed) throw new ClosedError('sqlite store is closed');
    try {
      return run();
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (typeof code !== 'string' || !code.startsWith('SQLITE_')) throw err;
      throw new IOError(`sqlite store: ${(err as Error).message} (${code})`, { cause: err, transient: sqliteTransient(err) });
    }
  }

  /**
   * One claim transaction (claim.ts): the acks of `acks` first, so the claim
   * sees the lanes and the room under maxInFlight they free; then the claim,
   * whose rows of priority 0 are searched past seq `after` only (0: all).
   */
  #claimOnce(req: ClaimRequest, after: number, acks: Claimed[] = []): ClaimStep & { acked: Claimed[] } {
    return this.#write((now) => {
      const acked = this.#ackRows(acks, now);
      return { acked, ...claimStep(this.#q, req, after, now) };
    });
  }

  /** Acks the deliveries of `cs` still held; returns those. Inside a write transaction. */
  #ackRows(cs: Claimed[], now: number): Claimed[] {
    return cs.filter((c) => this.#finished(this.#q.ack.get({ now, ...fence(c) }) as FinishedRow | undefined, c.group));
  }

  /**
   * After ack.sql or kill.sql: whether it finished the row (`row`, what it
   * returned), and if that row was keyed, the next delivery of its lane is
   * unblocked (unblock-lane.sql). The row's own key, not the claim's
   * message: a claim made by an older ferry may not carry it.
   */
  #finished(row: FinishedRow | undefined, group: string): boolean {
    if (row === undefined) return false;
    if (row.msg_key !== null) this.#q.unblockLane.run({ topic: row.topic, grp: group, key: row.msg_key });
    return true;
  }

  async ensureGroup(topic: string, group: string, startFrom: StartFrom): Promise<void> {
    this.#write((now) => {
      // 'earliest' starts before every stored message; 'latest' after the newest.
      this.#q.createGroup.run({ topic, grp: group, now, cursor: startFrom === 'earliest' ? 0 : (this.#q.newestSeq.get() as number) });
    });
  }

  /**
   * @throws PayloadTooLargeError a message is larger than a SQLite value may be here (better-sqlite3 sets
   *   that limit to V8's longest string, 2^29 - 24 bytes on 64-bit); nothing is stored.
   */
  async append(msgs: StoredMessage[]): Promise<void> {
    this.appendNow(msgs);
  }

  /** `append`, stored before it returns (see `Store.appendNow`). Throws as `append` rejects. */
  appendNow(msgs: StoredMessage[]): void {
    try {
      this.#appendRows(msgs);
    } catch (err) {
      // The driver refuses a value over the limit as it binds it (a range error), SQLite a row over it (SQLITE_TOOBIG).
      if (err instanceof RangeError || (err as { cause?: { code?: unknown } }).cause?.code === 'SQLITE_TOOBIG') {
        throw new PayloadTooLargeError(`a message is too large for SQLite: ${(err as Error).message}`, { cause: err });
      }
      throw err;
    }
    this.#notify(msgs);
  }

  #appendRows(msgs: StoredMessage[]): void {
    // One message is one statement, which SQLite runs as a transaction of
    // its own: it takes the write lock before it reads (an INSERT begins
    // with it, waiting out a busy file like BEGIN IMMEDIATE), so it needs no
    // BEGIN and COMMIT around it, which cost as much as the insert's binding.
    if (msgs.length === 1) this.#inWrite(() => this.#insert(msgs[0]!));
    else this.#writeNoClock(() => {
      for (const m of msgs) this.#insert(m);
    });
  }

  /** Stores `m`; an ID already stored changes nothing (ON CONFLICT DO NOTHING): idempotent. Values in `POSITIONAL.append`'s order. */
  #insert(m: StoredMessage): void {
    const deliverAt = m.deliverAt?.getTime() ?? null;
    const publishedAt = m.publishedAt.getTime();
    const headers = m.headers === undefined ? null : JSON.stringify(m.headers);
    this.#q.append.run(m.id, m.topic, m.key ?? null, m.payload, headers, publishedAt, deliverAt, deliverAt ?? publishedAt, m.priority ?? 0);
  }

  /**
   * Tells other handles on this file in this process that the topics of
   * `items` may have claimable work. Nothing to do when every listener is
   * this handle's own (one queue on the file: the usual case), which skips
   * an emit per keyed ack on a lane's hot path.
   */
  #notify(items: Array<{ topic: string } | { message: { topic: string } }>): void {
    if (this.#file === undefined || items.length === 0 || fileEvents.listenerCount(this.#file) <= this.#listening) return;
    const topics = new Set(items.map((i) => ('message' in i ? i.message.topic : i.topic)));
    for (const t of topics) fileEvents.emit(this.#file, t, this);
  }

  /**
   * Claims in short transactions: when one finds nothing due but stopped
   * with messages past the cursor left (many scheduled for later, say), the
   * next goes on from where it stopped after a turn of the event loop, until
   * something is due or the cursor reaches the newest message. So due
   * messages behind a long run of scheduled ones are found in one call, in
   * time proportional to the run, without blocking the process for all of it.
   */
  async claim(req: ClaimRequest): Promise<Claimed[]> {
    return (await this.#claim(req, [])).claimed;
  }

  /**
   * `ack(acks)` and `claim(req)` in one transaction: the acks are written
   * first, so a key lane they free is claimable in the same commit. The
   * claim's later short transactions (`claim`) carry no acks.
   */
  async ackAndClaim(acks: Claimed[], req: ClaimRequest): Promise<AckAndClaimed> {
    const { acked, claimed } = await this.#claim(req, acks);
    return { acked: acked.map((c) => c.deliveryId), claimed };
  }

  async #claim(req: ClaimRequest, acks: Claimed[]): Promise<{ acked: Claimed[]; claimed: Claimed[] }> {
    const first = this.#claimOnce(req, 0, acks);
    this.#notify(first.acked.filter((c) => c.message.key !== undefined)); // their lanes moved on
    for (let { claimed, more, cursor, rateWaitMs } = first; ; ) {
      if (claimed.length > 0 || !more) {
        if (rateWaitMs !== undefined) req.onRateLimited?.(rateWaitMs); // after the commit: it cannot undo the claim
        return { acked: first.acked, claimed };
      }
      await new Promise<void>((resolve) => setImmediate(resolve));
      try {
        ({ claimed, more, cursor, rateWaitMs } = this.#claimOnce(req, cursor));
      } catch (err) {
        // The acks are committed: report them, with nothing claimed (a claim
        // may find nothing); the next claim meets the error again.
        if (acks.length > 0) return { acked: first.acked, claimed: [] };
        throw err;
      }
    }
  }

  async ack(cs: Claimed[]): Promise<string[]> {
    const done = this.#write((now) => this.#ackRows(cs, now));
    this.#notify(done.filter((c) => c.message.key !== undefined)); // their lanes moved on
    return done.map((c) => c.deliveryId);
  }

  async retry(c: Claimed, backoffMs: number, lastError: string): Promise<boolean> {
    return this.#write((now) => this.#q.retry.run({ availableAt: now + Math.ceil(backoffMs), error: lastError, ...fence(c) }).changes === 1);
  }

  async kill(c: Claimed, lastError: string, opts?: KillOptions): Promise<boolean> {
    const killed = this.#write((now) =>
      this.#finished(this.#q.kill.get({ now, error: lastError, unrun: opts?.unrun ? 1 : 0, ...fence(c) }) as FinishedRow | undefined, c.group),
    );
    if (killed && c.message.key !== undefined) this.#notify([c]);
    return killed;
  }

  async extend(cs: Claimed[], leaseMs: number): Promise<string[]> {
    return this.#write((now) =>
      cs.filter((c) => this.#q.extend.run({ leaseUntil: now + Math.ceil(leaseMs), ...fence(c) }).changes === 1).map((c) => c.deliveryId),
    );
  }

  async release(cs: Claimed[]): Promise<void> {
    const back = this.#write(() => cs.filter((c) => this.#q.release.run(fence(c)).changes === 1));
    this.#notify(back);
  }

  async purge(policy: PurgePolicy, batch: number): Promise<number> {
    return this.#write((now) => {
      let removed = this.#q.purgeDead.run({ cutoff: now - policy.deadRetentionMs, limit: batch }).changes;
      const cutoff = now - policy.ackedRetentionMs;
      this.#q.recordSeqMark.run({ now });
      const seqs = this.#q.finishedMessages.all({ cutoff, limit: batch }) as number[];
      this.#q.pruneSeqMarks.run({ cutoff });
      // Raised before messages are deleted, so append.sql never hands out a deleted seq again.
      if (seqs.length > 0) this.#q.raisePurgedSeq.run({ seq: Math.max(...seqs) });
      for (const seq of seqs) {
        this.#q.deleteMessageDeliveries.run({ seq });
        this.#q.deleteMessage.run({ seq });
      }
      removed += seqs.length;
      return removed;
    });
  }

  async stats(topic: string, group: string): Promise<StoreStats> {
    if (this.#closed) throw new ClosedError('sqlite store is closed');
    return this.#db.transaction(() => {
      const now = this.#q.now.get() as number;
      const live = this.#q.liveStats.get({ topic, grp: group, now }) as { total: number; leased: number };
      const dead = this.#q.deadCount.get({ topic, grp: group }) as number;
      let oldestDue = this.#q.oldestDue.get({ topic, grp: group, now }) as number | null;
      let pending = live.total - live.leased;
      // Messages past the group's cursor have no delivery row yet: each is one pending delivery.
      const g = this.#q.groupState.get({ topic, grp: group }) as { cursor_seq: number; paused: number } | undefined;
      if (g !== undefined) {
        const ahead = this.#q.aheadOfCursor.get({ topic, after: g.cursor_seq, now }) as { n: number; oldest: number | null };
        pending += ahead.n;
        if (ahead.oldest !== null && (oldestDue === null || ahead.oldest < oldestDue)) oldestDue = ahead.oldest;
      }
      return { pending, leased: live.leased, dead, oldestPendingAgeMs: oldestDue === null ? 0 : now - oldestDue, paused: g !== undefined && g.paused !== 0 };
    })();
  }

  async ping(): Promise<void> {
    if (this.#closed) throw new ClosedError('sqlite store is closed');
    this.#q.now.get();
  }

  /**
   * See `Store.setGroupPaused` (set-group-paused.sql). A claim reads the
   * flag inside its own transaction, so every handle on the file honours it
   * from its next claim on. Resuming wakes the other handles on the file in
   * this process (`listen`); other processes find the group at their next
   * poll.
   */
  async setGroupPaused(topic: string, group: string, paused: boolean): Promise<boolean> {
    const registered = this.#write(() => this.#q.setGroupPaused.run({ topic, grp: group, paused: paused ? 1 : 0 }).changes === 1);
    if (registered && !paused) this.#notify([{ topic }]);
    return registered;
  }

  async removeGroup(topic: string, group: string): Promise<boolean> {
    return this.#write(() => {
      this.#q.removeGroupDeliveries.run({ topic, grp: group });
      this.#q.forgetClaimStarts.run({ topic, grp: group });
      return this.#q.removeGroup.run({ topic, grp: group }).changes === 1;
    });
  }

  async listGroups(topic?: string): Promise<ConsumerGroup[]> {
    if (this.#closed) throw new ClosedError('sqlite store is closed');
    return (topic === undefined ? this.#q.listGroups.all() : this.#q.listTopicGroups.all({ topic })) as ConsumerGroup[];
  }

  /** See `Store.duePairs` (due-pairs.ts). */
  async duePairs(pairs: readonly ConsumerGroup[]): Promise<ConsumerGroup[]> {
    if (this.#closed) throw new ClosedError('sqlite store is closed');
    this.#due ??= new SqliteDuePairs(this.#db);
    return this.#due.run(pairs);
  }

  async listMessages(topic: string, page: { after?: string; limit: number }): Promise<MessagePage> {
    if (this.#closed) throw new ClosedError('sqlite store is closed');
    // One row more than asked tells whether another page follows.
    const rows = this.#q.listMessages.all({ topic, after: parseSeqCursor(page.after), limit: page.limit + 1 }) as MessageRowDb[];
    const more = rows.length > page.limit;
    if (more) rows.pop();
    const out: MessagePage = { messages: rows.map(toMessage) };
    if (more) out.next = String(rows[rows.length - 1]!.seq);
    return out;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#db.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async acquireJanitor(holder: string, ttlMs: number): Promise<boolean> {
    return this.#write((now) => this.#q.janitor.run({ holder, now, ttlMs }).changes === 1);
  }

  /** See `Store.putSchedule` (put-schedule.sql). */
  async putSchedule(r: ScheduleRecord): Promise<boolean> {
    const values = scheduleValues(r);
    return this.#write(() => this.#q.putSchedule.run(values).changes === 1);
  }

  /** See `Store.deleteSchedule` (delete-schedule.sql). */
  async deleteSchedule(name: string): Promise<boolean> {
    return this.#write(() => this.#q.deleteSchedule.run({ name }).changes === 1);
  }

  /** See `Store.listSchedules` (list-schedules.sql). */
  async listSchedules(): Promise<ScheduleRecord[]> {
    if (this.#closed) throw new ClosedError('sqlite store is closed');
    return (this.#q.listSchedules.all() as ScheduleRow[]).map(scheduleFromRow);
  }

  /** See `Store.advanceSchedule` (advance-schedule.sql). */
  async advanceSchedule(name: string, revision: string, tick: Date): Promise<boolean> {
    return this.#write(() => this.#q.advanceSchedule.run({ name, revision, tick: tick.getTime() }).changes === 1);
  }

  /**
   * Calls `wake(topic)` whenever another handle on the same database file in
   * this process publishes to `topic`, acks or kills a keyed delivery on it
   * (freeing the next of its lane), or releases deliveries of it; until
   * `signal` aborts or this store closes. Other processes are not heard: they
   * are found by polling. A private database (`:memory:`) has no other
   * handles, so this only waits for `signal`.
   */
  async listen(signal: AbortSignal, wake: (topic: string) => void): Promise<void> {
    if (this.#closed) throw new ClosedError('sqlite store is closed');
    if (signal.aborted) return;
    const file = this.#file;
    const onWake = (topic: string, from: SqliteStore) => {
      if (from !== this) wake(topic);
    };
    if (file !== undefined) {
      fileEvents.on(file, onWake);
      this.#listening++;
    }
    try {
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    } finally {
      if (file !== undefined) {
        fileEvents.off(file, onWake);
        this.#listening--;
      }
    }
  }
}
