/**
 * The SQLite store (queue type `sqlite`), the embedded default: one file, one
 * process, better-sqlite3 loaded only when this store is opened.
 *
 * Rows (migrate.ts): `ferry_groups` (topic, group and its cursor),
 * `ferry_messages` (one per message; its `seq` is publish order) and
 * `ferry_deliveries` (one per message and group, keyed by (message_seq, grp)
 * and carrying its `deliveryId`). A publish writes only the message; a claim
 * makes the deliveries of the messages past its group's cursor before it
 * looks for due ones (`#advance`). A delivery's `state` is 0 pending, 1 leased,
 * 2 acked, 3 dead; partial indexes over `state < 2` keep claims proportional
 * to live work however many finished rows wait for the janitor.
 *
 * Times are integers of milliseconds on the database's clock (`NOW_MS`); the
 * engine passes only durations. Every write transaction is `BEGIN IMMEDIATE`
 * and reads the clock after taking the write lock, so a lease never starts
 * before the claim could be made. WAL journal mode; `synchronous` is FULL by
 * default, so a committed publish or ack survives a power cut, not only a
 * process crash.
 */
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { closeSync, constants, openSync, realpathSync } from 'node:fs';
import type BetterSqlite3 from 'better-sqlite3';
import { ClosedError, InvalidArgumentError, IOError, PayloadTooLargeError } from '../../../errors.js';
import { sqliteTransient } from '../transient.js';
import { deliveryId } from '../../delivery-id.js';
import { takeClaimable } from '../recovered.js';
import { parseSeqCursor } from '../seq-cursor.js';
import { setUpSchema } from './migrate.js';
import { SqliteDuePairs } from './due-pairs.js';
import type { AckAndClaimed, ClaimRequest, Claimed, ConsumerGroup, KillOptions, MessagePage, PurgePolicy, QueueStats, StartFrom, Store, StoredMessage } from '../../types.js';

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

/** Page size of a database file the store creates, bytes. */
export const PAGE_SIZE = 8192;

/** Mode of a database file the store creates; SQLite copies it to the `-wal` and `-shm` files. */
const DATABASE_FILE_MODE = 0o600;

/**
 * Creates the database file at `path` with mode 0600 unless it exists, so
 * SQLite never creates it with its default 0644. `:memory:`, `''` (a
 * temporary database) and `file:` URIs are left to SQLite.
 */
function createPrivate(path: string): void {
  if (path === ':memory:' || path.startsWith('file:')) return;
  closeSync(openSync(path, constants.O_RDONLY | constants.O_CREAT, DATABASE_FILE_MODE));
}

/** The database clock in integer milliseconds since the epoch. */
const NOW_MS = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";
const PENDING = 0;
const LEASED = 1;
const ACKED = 2;
const DEAD = 3;
/** A claim short of due deliveries makes those of at least this many newer messages at once (`#advance`)... */
const ADVANCE_MIN = 256;
/** ...and at most this many chunks per transaction, so the process is never blocked for long behind many scheduled messages. */
const ADVANCE_ROUNDS = 4;


interface MessageRowDb {
  seq: number;
  id: string;
  topic: string;
  msg_key: string | null;
  payload: Buffer;
  headers: string | null;
  published_at: number;
  deliver_at: number | null;
}

interface ClaimRowDb extends MessageRowDb {
  delivery_id: string;
  attempt: number;
  /** PENDING, or LEASED when its lease expired (the delivery is recovered). */
  state: number;
}

function toMessage(r: MessageRowDb): StoredMessage {
  const m: StoredMessage = {
    id: r.id,
    topic: r.topic,
    payload: new Uint8Array(r.payload.buffer, r.payload.byteOffset, r.payload.byteLength),
    publishedAt: new Date(r.published_at),
  };
  if (r.msg_key !== null) m.key = r.msg_key;
  if (r.headers !== null) m.headers = JSON.parse(r.headers) as Record<string, string>;
  if (r.deliver_at !== null) m.deliverAt = new Date(r.deliver_at);
  return m;
}

/**
 * The `seq` of a new message: one past the newest stored and the highest
 * ever purged (migrate.ts, version 4), so a `seq` is never reused and a
 * group cursor never lies past a message it has not seen. Both reads touch
 * only pages the insert writes anyway or that stay clean.
 */
const NEXT_SEQ = `max(coalesce((SELECT max(seq) FROM ferry_messages), 0), coalesce((SELECT value FROM ferry_meta WHERE name = 'purged_seq'), 0)) + 1`;

/**
 * A write fenced on a claim: the delivery of message ID `?` to group `?`,
 * still leased under claim token `?`. Found through the message's ID, as
 * deliveries are keyed by (message_seq, grp).
 */
const FENCED = `message_seq = (SELECT seq FROM ferry_messages WHERE id = ?) AND grp = ? AND claim_token = ? AND state = ${LEASED}`;

/** Prepares every statement once per connection. */
function statements(db: Database) {
  return {
    now: db.prepare(`SELECT ${NOW_MS}`).pluck(),
    insertGroup: db.prepare(`INSERT INTO ferry_groups (topic, grp, created_at, cursor_seq) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`),
    cursor: db.prepare(`SELECT cursor_seq FROM ferry_groups WHERE topic = ? AND grp = ?`).pluck(),
    setCursor: db.prepare(`UPDATE ferry_groups SET cursor_seq = ? WHERE topic = ? AND grp = ?`),
    // Every later message has a larger seq (NEXT_SEQ).
    newestSeq: db.prepare(`SELECT coalesce(max(seq), 0) FROM ferry_messages`).pluck(),
    messagesAfter: db.prepare(`SELECT seq, id, msg_key, deliver_at FROM ferry_messages WHERE topic = ? AND seq > ? ORDER BY seq LIMIT ?`),
    // The messages past a group's cursor: all pending, due from due_at.
    ahead: db.prepare(
      `SELECT count(*) AS n, min(CASE WHEN due_at <= @c THEN due_at END) AS oldest FROM ferry_messages WHERE topic = @a AND seq > @s`,
    ),
    insertMessage: db.prepare(
      `INSERT INTO ferry_messages (seq, id, topic, msg_key, payload, headers, published_at, deliver_at, due_at)
       VALUES (${NEXT_SEQ}, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
    ),
    insertDelivery: db.prepare(
      `INSERT INTO ferry_deliveries (delivery_id, message_seq, topic, grp, msg_key, state, available_at)
       VALUES (?, ?, ?, ?, ?, ${PENDING}, ?) ON CONFLICT DO NOTHING`,
    ),
    leasedCount: db
      // "state < 2" lets SQLite use the partial index of live rows.
      .prepare(`SELECT count(*) FROM ferry_deliveries WHERE topic = ? AND grp = ? AND state < 2 AND state = ${LEASED} AND lease_until > ?`)
      .pluck(),
    // Due deliveries past seq @s in publish order; a keyed one only when nothing earlier on its lane is live.
    due: db.prepare(
      `SELECT d.delivery_id, d.attempt, d.state, m.seq, m.id, m.topic, m.msg_key, m.payload, m.headers, m.published_at, m.deliver_at
       FROM ferry_deliveries d JOIN ferry_messages m ON m.seq = d.message_seq
       WHERE d.topic = @a AND d.grp = @b AND d.state < 2 AND d.message_seq > @s
         AND ((d.state = ${PENDING} AND d.available_at <= @c) OR (d.state = ${LEASED} AND d.lease_until <= @c))
         AND (d.msg_key IS NULL OR NOT EXISTS (
           SELECT 1 FROM ferry_deliveries e
           WHERE e.topic = d.topic AND e.grp = d.grp AND e.msg_key = d.msg_key AND e.state < 2 AND e.message_seq < d.message_seq))
       ORDER BY d.message_seq LIMIT @d`,
    ),
    lease: db.prepare(
      `UPDATE ferry_deliveries SET state = ${LEASED}, attempt = attempt + 1, claim_token = ?, holder = ?, lease_until = ?
       WHERE message_seq = ? AND grp = ?`,
    ),
    ack: db.prepare(
      `UPDATE ferry_deliveries SET state = ${ACKED}, finished_at = ?, claim_token = NULL, holder = NULL, lease_until = NULL
       WHERE ${FENCED}`,
    ),
    retry: db.prepare(
      `UPDATE ferry_deliveries SET state = ${PENDING}, available_at = ?, last_error = ?, claim_token = NULL, holder = NULL, lease_until = NULL
       WHERE ${FENCED}`,
    ),
    // The last parameter is 1 when the claim ran nothing and is not counted as an attempt.
    kill: db.prepare(
      `UPDATE ferry_deliveries SET state = ${DEAD}, finished_at = ?, last_error = ?, claim_token = NULL, holder = NULL, lease_until = NULL,
         attempt = attempt - ?
       WHERE ${FENCED}`,
    ),
    extend: db.prepare(
      `UPDATE ferry_deliveries SET lease_until = ? WHERE ${FENCED}`,
    ),
    release: db.prepare(
      `UPDATE ferry_deliveries SET state = ${PENDING}, attempt = attempt - 1, claim_token = NULL, holder = NULL, lease_until = NULL
       WHERE ${FENCED}`,
    ),
    purgeDead: db.prepare(
      `DELETE FROM ferry_deliveries WHERE (message_seq, grp) IN (
         SELECT message_seq, grp FROM ferry_deliveries WHERE state = ${DEAD} AND finished_at < ? LIMIT ?)`,
    ),
    // Messages due before the cutoff that every group of their topic has passed
    // and whose every delivery was acked before it.
    finishedMessages: db
      .prepare(
        `SELECT seq FROM ferry_messages m WHERE m.due_at < @a
           AND NOT EXISTS (SELECT 1 FROM ferry_groups g WHERE g.topic = m.topic AND g.cursor_seq < m.seq)
           AND NOT EXISTS (
             SELECT 1 FROM ferry_deliveries d WHERE d.message_seq = m.seq AND (d.state <> ${ACKED} OR d.finished_at >= @a))
         ORDER BY m.due_at LIMIT @b`,
      )
      .pluck(),
    deleteMessage: db.prepare(`DELETE FROM ferry_messages WHERE seq = ?`),
    // Raised before messages are deleted, so NEXT_SEQ never hands out a deleted seq again.
    raisePurgedSeq: db.prepare(
      `INSERT INTO ferry_meta (name, value) VALUES ('purged_seq', ?) ON CONFLICT (name) DO UPDATE SET value = max(value, excluded.value)`,
    ),
    deleteMessageDeliveries: db.prepare(`DELETE FROM ferry_deliveries WHERE message_seq = ?`),
    liveStats: db.prepare(
      `SELECT count(*) AS total, coalesce(sum(state = ${LEASED} AND lease_until > @c), 0) AS leased
       FROM ferry_deliveries WHERE topic = @a AND grp = @b AND state < 2`,
    ),
    deadCount: db.prepare(`SELECT count(*) FROM ferry_deliveries WHERE topic = ? AND grp = ? AND state = ${DEAD}`).pluck(),
    deleteGroup: db.prepare(`DELETE FROM ferry_groups WHERE topic = ? AND grp = ?`),
    // Through the topic's messages: every delivery of the group belongs to one,
    // and both indexes used exist already (no index over every state by group).
    deleteGroupDeliveries: db.prepare(
      `DELETE FROM ferry_deliveries WHERE grp = @b AND message_seq IN (SELECT seq FROM ferry_messages WHERE topic = @a)`,
    ),
    listGroups: db.prepare(`SELECT topic, grp AS "group" FROM ferry_groups ORDER BY topic, grp`),
    listTopicGroups: db.prepare(`SELECT topic, grp AS "group" FROM ferry_groups WHERE topic = ? ORDER BY grp`),
    listMessages: db.prepare(
      `SELECT seq, id, topic, msg_key, payload, headers, published_at, deliver_at FROM ferry_messages
       WHERE topic = ? AND seq > ? ORDER BY seq LIMIT ?`,
    ),
    // When the longest-waiting due delivery became claimable: its due time or backoff end, or its lease's expiry.
    oldestDue: db
      .prepare(
        `SELECT min(CASE WHEN d.state = ${PENDING} THEN max(d.available_at, m.due_at) ELSE d.lease_until END)
         FROM ferry_deliveries d JOIN ferry_messages m ON m.seq = d.message_seq
         WHERE d.topic = @a AND d.grp = @b AND d.state < 2
           AND ((d.state = ${PENDING} AND d.available_at <= @c AND m.due_at <= @c) OR (d.state = ${LEASED} AND d.lease_until <= @c))`,
      )
      .pluck(),
    janitor: db.prepare(
      `INSERT INTO ferry_janitor (name, holder, until) VALUES ('janitor', @a, @b + @c)
       ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
       WHERE ferry_janitor.until <= @b OR ferry_janitor.holder = excluded.holder`,
    ),
  };
}

type Statements = ReturnType<typeof statements>;

/** The parameters of `FENCED` for a claim. */
const fence = (c: Claimed): [string, string, string] => [c.message.id, c.group, c.claimToken];

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
  /** One transaction function for every write (better-sqlite3 builds five wrappers per `transaction` call). */
  readonly #tx: BetterSqlite3.Transaction<(fn: (now: number) => unknown) => unknown>;
  #closed = false;
  /** The poll query, prepared on first use (due-pairs.ts). */
  #due: SqliteDuePairs | undefined;

  private constructor(db: Database, file: string | undefined) {
    this.#db = db;
    this.#q = statements(db);
    this.#file = file;
    this.#tx = db.transaction((fn: (now: number) => unknown) => fn(this.#q.now.get() as number));
  }

  /**
   * Opens (creating when missing) the database at `opts.path`, in WAL mode.
   *
   * @throws InvalidArgumentError no path.
   * @throws IOError the database cannot be opened or set up (the driver's error is the cause).
   */
  static async open(opts: SqliteStoreOptions): Promise<SqliteStore> {
    if (typeof opts?.path !== 'string' || opts.path === '') throw new InvalidArgumentError('sqlite store needs a path');
    const Driver = await loadDriver();
    let db: Database;
    try {
      createPrivate(opts.path);
      db = new Driver(opts.path, { timeout: opts.busyTimeoutMs ?? 5000 });
    } catch (err) {
      throw new IOError(`cannot open SQLite database ${opts.path}: ${(err as Error).message}`, { cause: err });
    }
    try {
      // Only a new, empty file takes it (before WAL mode): rows of about 1 KiB
      // fill 8 KiB pages with less slack than 4 KiB ones, so a publish writes fewer bytes.
      db.pragma(`page_size = ${PAGE_SIZE}`);
      db.pragma('journal_mode = WAL');
      db.pragma(`synchronous = ${opts.synchronous === 'normal' ? 'NORMAL' : 'FULL'}`);
      setUpSchema(db);
      const file = db.memory || opts.path === '' ? undefined : realpathSync(opts.path);
      return new SqliteStore(db, file);
    } catch (err) {
      db.close();
      throw new IOError(`cannot set up SQLite database ${opts.path}: ${(err as Error).message}`, { cause: err });
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
    if (this.#closed) throw new ClosedError('sqlite store is closed');
    try {
      return this.#tx.immediate(fn) as T;
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (typeof code !== 'string' || !code.startsWith('SQLITE_')) throw err;
      throw new IOError(`sqlite store: ${(err as Error).message} (${code})`, { cause: err, transient: sqliteTransient(err) });
    }
  }

  /**
   * Makes the group's pending deliveries of up to `max` messages past its
   * cursor, in publish order, and moves the cursor past them. Returns the
   * cursor before and after, and how many it made (fewer than `max`: the
   * cursor reached the newest message); none when the group is not
   * registered. Inside a write transaction.
   */
  #advance(topic: string, group: string, max: number): { from: number; to: number; made: number } {
    const from = this.#q.cursor.get(topic, group) as number | undefined;
    if (from === undefined) return { from: 0, to: 0, made: 0 };
    const rows = this.#q.messagesAfter.all(topic, from, max) as Array<{ seq: number; id: string; msg_key: string | null; deliver_at: number | null }>;
    if (rows.length === 0) return { from, to: from, made: 0 };
    for (const r of rows) this.#q.insertDelivery.run(deliveryId(r.id, group), r.seq, topic, group, r.msg_key, r.deliver_at ?? 0);
    const to = rows[rows.length - 1]!.seq;
    this.#q.setCursor.run(to, topic, group);
    return { from, to, made: rows.length };
  }

  /**
   * One claim transaction: the due deliveries already made past seq
   * `after` (0: all of them), then, while fewer than the limit are due,
   * those of the next chunks of messages past the cursor (only each new
   * range is searched). `more` tells that it stopped with messages past the
   * cursor left, and `cursor` where it stopped.
   */
  #claimOnce(req: ClaimRequest, after: number, acks: Claimed[] = []): { acked: Claimed[]; claimed: Claimed[]; more: boolean; cursor: number } {
    return this.#write((now) => {
      // Acks first, so the claim sees the lanes and the room under maxInFlight they free.
      const acked = this.#ackRows(acks, now);
      let limit = req.max;
      if (req.maxInFlight > 0) limit = Math.min(limit, req.maxInFlight - (this.#q.leasedCount.get(req.topic, req.group, now) as number));
      if (limit <= 0) return { acked, claimed: [], more: false, cursor: after };
      const found = this.#q.due.all({ a: req.topic, b: req.group, c: now, d: limit, s: after }) as ClaimRowDb[];
      // A delivery whose lease expired is claimed alone (recovered.ts): then no new deliveries are made either.
      const rows = takeClaimable(found, (r) => r.state === LEASED);
      const alone = rows.length < found.length || rows[0]?.state === LEASED;
      const chunk = Math.max(ADVANCE_MIN, 4 * limit);
      let more = false;
      let cursor = after;
      for (let i = 0; i < ADVANCE_ROUNDS && rows.length < limit && !alone; i++) {
        const { from, to, made } = this.#advance(req.topic, req.group, chunk);
        if (made > 0) rows.push(...(this.#q.due.all({ a: req.topic, b: req.group, c: now, d: limit - rows.length, s: from }) as ClaimRowDb[]));
        cursor = to;
        more = made === chunk;
        if (!more) break;
      }
      const claimed = rows.map((r) => {
        const token = randomUUID();
        this.#q.lease.run(token, req.runnerId, now + Math.ceil(req.leaseMs), r.seq, req.group);
        const c: Claimed = { deliveryId: r.delivery_id, claimToken: token, group: req.group, attempt: r.attempt + 1, message: toMessage(r) };
        if (r.state === LEASED) c.recovered = true;
        return c;
      });
      return { acked, claimed, more, cursor };
    });
  }

  /** Acks the deliveries of `cs` still held; returns those. Inside a write transaction. */
  #ackRows(cs: Claimed[], now: number): Claimed[] {
    return cs.filter((c) => this.#q.ack.run(now, ...fence(c)).changes === 1);
  }

  async ensureGroup(topic: string, group: string, startFrom: StartFrom): Promise<void> {
    this.#write((now) => {
      // 'earliest' starts before every stored message; 'latest' after the newest.
      this.#q.insertGroup.run(topic, group, now, startFrom === 'earliest' ? 0 : (this.#q.newestSeq.get() as number));
    });
  }

  /**
   * @throws PayloadTooLargeError a message is larger than a SQLite value may be here (better-sqlite3 sets
   *   that limit to V8's longest string, 2^29 - 24 bytes on 64-bit); nothing is stored.
   */
  async append(msgs: StoredMessage[]): Promise<void> {
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
    this.#write(() => {
      for (const m of msgs) {
        const deliverAt = m.deliverAt?.getTime() ?? null;
        const publishedAt = m.publishedAt.getTime();
        // An ID already stored changes nothing (ON CONFLICT DO NOTHING): idempotent.
        this.#q.insertMessage.run(
          m.id, m.topic, m.key ?? null, m.payload, m.headers === undefined ? null : JSON.stringify(m.headers),
          publishedAt, deliverAt, deliverAt ?? publishedAt,
        );
      }
    });
  }

  /** Tells other handles on this file in this process that the topics of `items` may have claimable work. */
  #notify(items: Array<{ topic: string } | { message: { topic: string } }>): void {
    if (this.#file === undefined || items.length === 0 || fileEvents.listenerCount(this.#file) === 0) return;
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
    for (let { claimed, more, cursor } = first; ; ) {
      if (claimed.length > 0 || !more) return { acked: first.acked, claimed };
      await new Promise<void>((resolve) => setImmediate(resolve));
      try {
        ({ claimed, more, cursor } = this.#claimOnce(req, cursor));
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
    return this.#write((now) => this.#q.retry.run(now + Math.ceil(backoffMs), lastError, ...fence(c)).changes === 1);
  }

  async kill(c: Claimed, lastError: string, opts?: KillOptions): Promise<boolean> {
    const killed = this.#write((now) => this.#q.kill.run(now, lastError, opts?.unrun ? 1 : 0, ...fence(c)).changes === 1);
    if (killed && c.message.key !== undefined) this.#notify([c]);
    return killed;
  }

  async extend(cs: Claimed[], leaseMs: number): Promise<string[]> {
    return this.#write((now) =>
      cs.filter((c) => this.#q.extend.run(now + Math.ceil(leaseMs), ...fence(c)).changes === 1).map((c) => c.deliveryId),
    );
  }

  async release(cs: Claimed[]): Promise<void> {
    const back = this.#write(() => cs.filter((c) => this.#q.release.run(...fence(c)).changes === 1));
    this.#notify(back);
  }

  async purge(policy: PurgePolicy, batch: number): Promise<number> {
    return this.#write((now) => {
      let removed = this.#q.purgeDead.run(now - policy.deadRetentionMs, batch).changes;
      const seqs = this.#q.finishedMessages.all({ a: now - policy.ackedRetentionMs, b: batch }) as number[];
      if (seqs.length > 0) this.#q.raisePurgedSeq.run(Math.max(...seqs));
      for (const seq of seqs) {
        this.#q.deleteMessageDeliveries.run(seq);
        this.#q.deleteMessage.run(seq);
      }
      removed += seqs.length;
      return removed;
    });
  }

  async stats(topic: string, group: string): Promise<QueueStats> {
    if (this.#closed) throw new ClosedError('sqlite store is closed');
    return this.#db.transaction(() => {
      const now = this.#q.now.get() as number;
      const live = this.#q.liveStats.get({ a: topic, b: group, c: now }) as { total: number; leased: number };
      const dead = this.#q.deadCount.get(topic, group) as number;
      let oldestDue = this.#q.oldestDue.get({ a: topic, b: group, c: now }) as number | null;
      let pending = live.total - live.leased;
      // Messages past the group's cursor have no delivery row yet: each is one pending delivery.
      const cursor = this.#q.cursor.get(topic, group) as number | undefined;
      if (cursor !== undefined) {
        const ahead = this.#q.ahead.get({ a: topic, s: cursor, c: now }) as { n: number; oldest: number | null };
        pending += ahead.n;
        if (ahead.oldest !== null && (oldestDue === null || ahead.oldest < oldestDue)) oldestDue = ahead.oldest;
      }
      return { pending, leased: live.leased, dead, oldestPendingAgeMs: oldestDue === null ? 0 : now - oldestDue };
    })();
  }

  async ping(): Promise<void> {
    if (this.#closed) throw new ClosedError('sqlite store is closed');
    this.#q.now.get();
  }

  async removeGroup(topic: string, group: string): Promise<boolean> {
    return this.#write(() => {
      this.#q.deleteGroupDeliveries.run({ a: topic, b: group });
      return this.#q.deleteGroup.run(topic, group).changes === 1;
    });
  }

  async listGroups(topic?: string): Promise<ConsumerGroup[]> {
    if (this.#closed) throw new ClosedError('sqlite store is closed');
    return (topic === undefined ? this.#q.listGroups.all() : this.#q.listTopicGroups.all(topic)) as ConsumerGroup[];
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
    const rows = this.#q.listMessages.all(topic, parseSeqCursor(page.after), page.limit + 1) as MessageRowDb[];
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
    return this.#write((now) => this.#q.janitor.run({ a: holder, b: now, c: ttlMs }).changes === 1);
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
    if (file !== undefined) fileEvents.on(file, onWake);
    try {
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    } finally {
      if (file !== undefined) fileEvents.off(file, onWake);
    }
  }
}
