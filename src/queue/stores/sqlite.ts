/**
 * The SQLite store (queue type `sqlite`), the embedded default: one file, one
 * process, better-sqlite3 loaded only when this store is opened.
 *
 * Rows: `ferry_groups` (topic, group), `ferry_messages` (one per message; its
 * `seq` is publish order) and `ferry_deliveries` (one per message and group,
 * keyed by `deliveryId`). A delivery's `state` is 0 pending, 1 leased,
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
import type BetterSqlite3 from 'better-sqlite3';
import { ClosedError, InvalidArgumentError, IOError } from '../../errors.js';
import { deliveryId } from '../delivery-id.js';
import type { Claimed, ClaimRequest, ConsumerGroup, MessagePage, PurgePolicy, QueueStats, StartFrom, Store, StoredMessage } from '../types.js';

type Database = BetterSqlite3.Database;

/** Options of `SqliteStore.open`. */
export interface SqliteStoreOptions {
  /** Database file; created with its tables when missing. `:memory:` works for a throwaway store. */
  path: string;
  /** SQLite `synchronous` pragma: `full` (default) survives power loss; `normal` only process crashes, and is faster. */
  synchronous?: 'full' | 'normal';
  /** How long a write waits for another connection's lock, ms. Default 5000. */
  busyTimeoutMs?: number;
}

/** The database clock in integer milliseconds since the epoch. */
const NOW_MS = "CAST(unixepoch('subsec') * 1000 AS INTEGER)";
const PENDING = 0;
const LEASED = 1;
const ACKED = 2;
const DEAD = 3;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS ferry_groups (
  topic TEXT NOT NULL,
  grp TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (topic, grp)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ferry_messages (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  topic TEXT NOT NULL,
  msg_key TEXT,
  payload BLOB NOT NULL,
  headers TEXT,
  published_at INTEGER NOT NULL,
  deliver_at INTEGER,
  due_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS ferry_messages_topic ON ferry_messages (topic, seq);
CREATE INDEX IF NOT EXISTS ferry_messages_due ON ferry_messages (due_at);
CREATE TABLE IF NOT EXISTS ferry_deliveries (
  delivery_id TEXT PRIMARY KEY,
  message_seq INTEGER NOT NULL,
  topic TEXT NOT NULL,
  grp TEXT NOT NULL,
  msg_key TEXT,
  state INTEGER NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 0,
  available_at INTEGER NOT NULL,
  lease_until INTEGER,
  claim_token TEXT,
  holder TEXT,
  last_error TEXT,
  finished_at INTEGER
);
CREATE INDEX IF NOT EXISTS ferry_deliveries_live ON ferry_deliveries (topic, grp, message_seq) WHERE state < 2;
CREATE INDEX IF NOT EXISTS ferry_deliveries_lane ON ferry_deliveries (topic, grp, msg_key, message_seq) WHERE state < 2 AND msg_key IS NOT NULL;
CREATE INDEX IF NOT EXISTS ferry_deliveries_message ON ferry_deliveries (message_seq);
CREATE INDEX IF NOT EXISTS ferry_deliveries_dead ON ferry_deliveries (topic, grp, finished_at) WHERE state = 3;
CREATE INDEX IF NOT EXISTS ferry_deliveries_dead_age ON ferry_deliveries (finished_at) WHERE state = 3;
CREATE TABLE IF NOT EXISTS ferry_janitor (
  name TEXT PRIMARY KEY,
  holder TEXT NOT NULL,
  until INTEGER NOT NULL
) WITHOUT ROWID;
`;

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

/** Prepares every statement once per connection. */
function statements(db: Database) {
  return {
    now: db.prepare(`SELECT ${NOW_MS}`).pluck(),
    insertGroup: db.prepare(`INSERT INTO ferry_groups (topic, grp, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`),
    groupsOf: db.prepare(`SELECT grp FROM ferry_groups WHERE topic = ?`).pluck(),
    topicMessages: db.prepare(`SELECT seq, id, msg_key, deliver_at FROM ferry_messages WHERE topic = ? ORDER BY seq`),
    insertMessage: db.prepare(
      `INSERT INTO ferry_messages (id, topic, msg_key, payload, headers, published_at, deliver_at, due_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
    ),
    insertDelivery: db.prepare(
      `INSERT INTO ferry_deliveries (delivery_id, message_seq, topic, grp, msg_key, state, available_at)
       VALUES (?, ?, ?, ?, ?, ${PENDING}, ?) ON CONFLICT DO NOTHING`,
    ),
    leasedCount: db
      // "state < 2" lets SQLite use the partial index of live rows.
      .prepare(`SELECT count(*) FROM ferry_deliveries WHERE topic = ? AND grp = ? AND state < 2 AND state = ${LEASED} AND lease_until > ?`)
      .pluck(),
    // Due deliveries in publish order; a keyed one only when nothing earlier on its lane is live.
    due: db.prepare(
      `SELECT d.delivery_id, d.attempt, m.seq, m.id, m.topic, m.msg_key, m.payload, m.headers, m.published_at, m.deliver_at
       FROM ferry_deliveries d JOIN ferry_messages m ON m.seq = d.message_seq
       WHERE d.topic = @a AND d.grp = @b AND d.state < 2
         AND ((d.state = ${PENDING} AND d.available_at <= @c) OR (d.state = ${LEASED} AND d.lease_until <= @c))
         AND (d.msg_key IS NULL OR NOT EXISTS (
           SELECT 1 FROM ferry_deliveries e
           WHERE e.topic = d.topic AND e.grp = d.grp AND e.msg_key = d.msg_key AND e.state < 2 AND e.message_seq < d.message_seq))
       ORDER BY d.message_seq LIMIT @d`,
    ),
    lease: db.prepare(
      `UPDATE ferry_deliveries SET state = ${LEASED}, attempt = attempt + 1, claim_token = ?, holder = ?, lease_until = ?
       WHERE delivery_id = ?`,
    ),
    ack: db.prepare(
      `UPDATE ferry_deliveries SET state = ${ACKED}, finished_at = ?, claim_token = NULL, holder = NULL, lease_until = NULL
       WHERE delivery_id = ? AND claim_token = ? AND state = ${LEASED}`,
    ),
    retry: db.prepare(
      `UPDATE ferry_deliveries SET state = ${PENDING}, available_at = ?, last_error = ?, claim_token = NULL, holder = NULL, lease_until = NULL
       WHERE delivery_id = ? AND claim_token = ? AND state = ${LEASED}`,
    ),
    kill: db.prepare(
      `UPDATE ferry_deliveries SET state = ${DEAD}, finished_at = ?, last_error = ?, claim_token = NULL, holder = NULL, lease_until = NULL
       WHERE delivery_id = ? AND claim_token = ? AND state = ${LEASED}`,
    ),
    extend: db.prepare(
      `UPDATE ferry_deliveries SET lease_until = ? WHERE delivery_id = ? AND claim_token = ? AND state = ${LEASED}`,
    ),
    release: db.prepare(
      `UPDATE ferry_deliveries SET state = ${PENDING}, attempt = attempt - 1, claim_token = NULL, holder = NULL, lease_until = NULL
       WHERE delivery_id = ? AND claim_token = ? AND state = ${LEASED}`,
    ),
    purgeDead: db.prepare(
      `DELETE FROM ferry_deliveries WHERE rowid IN (
         SELECT rowid FROM ferry_deliveries WHERE state = ${DEAD} AND finished_at < ? LIMIT ?)`,
    ),
    // Messages due before the cutoff whose every delivery was acked before it.
    finishedMessages: db
      .prepare(
        `SELECT seq FROM ferry_messages m WHERE m.due_at < @a AND NOT EXISTS (
           SELECT 1 FROM ferry_deliveries d WHERE d.message_seq = m.seq AND (d.state <> ${ACKED} OR d.finished_at >= @a))
         ORDER BY m.due_at LIMIT @b`,
      )
      .pluck(),
    deleteMessage: db.prepare(`DELETE FROM ferry_messages WHERE seq = ?`),
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

let driver: Promise<typeof BetterSqlite3> | undefined;

/** Imports better-sqlite3 on first use, so importing `ferry/queue` never loads the native module. */
function loadDriver(): Promise<typeof BetterSqlite3> {
  driver ??= import('better-sqlite3').then((m) => (m as { default: typeof BetterSqlite3 }).default);
  return driver;
}

/**
 * A `Store` in one SQLite file (queue type `sqlite`). Single process: other
 * processes may open the same file in turn (a restarted consumer finishes
 * what a killed one left), but it offers no wake source across processes.
 * Use `SqliteStore.open`.
 */
export class SqliteStore implements Store {
  readonly #db: Database;
  readonly #q: Statements;
  #closed = false;

  private constructor(db: Database) {
    this.#db = db;
    this.#q = statements(db);
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
      db = new Driver(opts.path, { timeout: opts.busyTimeoutMs ?? 5000 });
    } catch (err) {
      throw new IOError(`cannot open SQLite database ${opts.path}: ${(err as Error).message}`, { cause: err });
    }
    try {
      db.pragma('journal_mode = WAL');
      db.pragma(`synchronous = ${opts.synchronous === 'normal' ? 'NORMAL' : 'FULL'}`);
      db.exec(SCHEMA);
      return new SqliteStore(db);
    } catch (err) {
      db.close();
      throw new IOError(`cannot set up SQLite database ${opts.path}: ${(err as Error).message}`, { cause: err });
    }
  }

  /** The `journal_mode` pragma, for checks. */
  get journalMode(): string {
    return String(this.#db.pragma('journal_mode', { simple: true }));
  }

  /** Runs `fn` in a `BEGIN IMMEDIATE` transaction and hands it the database clock read after the lock was taken. */
  #write<T>(fn: (now: number) => T): T {
    if (this.#closed) throw new ClosedError('sqlite store is closed');
    return this.#db.transaction(() => fn(this.#q.now.get() as number)).immediate();
  }

  #newDeliveries(seq: number, id: string, topic: string, key: string | null, deliverAt: number | null, groups: string[]): void {
    for (const g of groups) this.#q.insertDelivery.run(deliveryId(id, g), seq, topic, g, key, deliverAt ?? 0);
  }

  async ensureGroup(topic: string, group: string, startFrom: StartFrom): Promise<void> {
    this.#write((now) => {
      if (this.#q.insertGroup.run(topic, group, now).changes === 0 || startFrom !== 'earliest') return;
      const rows = this.#q.topicMessages.all(topic) as Array<{ seq: number; id: string; msg_key: string | null; deliver_at: number | null }>;
      for (const r of rows) this.#newDeliveries(r.seq, r.id, topic, r.msg_key, r.deliver_at, [group]);
    });
  }

  async append(msgs: StoredMessage[]): Promise<void> {
    this.#write(() => {
      const groups = new Map<string, string[]>();
      for (const m of msgs) {
        const deliverAt = m.deliverAt?.getTime() ?? null;
        const publishedAt = m.publishedAt.getTime();
        const res = this.#q.insertMessage.run(
          m.id, m.topic, m.key ?? null, Buffer.from(m.payload.buffer, m.payload.byteOffset, m.payload.byteLength), m.headers === undefined ? null : JSON.stringify(m.headers),
          publishedAt, deliverAt, deliverAt ?? publishedAt,
        );
        if (res.changes === 0) continue; // already stored: idempotent
        let gs = groups.get(m.topic);
        if (!gs) groups.set(m.topic, (gs = this.#q.groupsOf.all(m.topic) as string[]));
        this.#newDeliveries(Number(res.lastInsertRowid), m.id, m.topic, m.key ?? null, deliverAt, gs);
      }
    });
  }

  async claim(req: ClaimRequest): Promise<Claimed[]> {
    return this.#write((now) => {
      let limit = req.max;
      if (req.maxInFlight > 0) limit = Math.min(limit, req.maxInFlight - (this.#q.leasedCount.get(req.topic, req.group, now) as number));
      if (limit <= 0) return [];
      const rows = this.#q.due.all({ a: req.topic, b: req.group, c: now, d: limit }) as ClaimRowDb[];
      return rows.map((r) => {
        const token = randomUUID();
        this.#q.lease.run(token, req.runnerId, now + Math.ceil(req.leaseMs), r.delivery_id);
        return { deliveryId: r.delivery_id, claimToken: token, group: req.group, attempt: r.attempt + 1, message: toMessage(r) };
      });
    });
  }

  async ack(cs: Claimed[]): Promise<string[]> {
    return this.#write((now) => cs.filter((c) => this.#q.ack.run(now, c.deliveryId, c.claimToken).changes === 1).map((c) => c.deliveryId));
  }

  async retry(c: Claimed, backoffMs: number, lastError: string): Promise<boolean> {
    return this.#write((now) => this.#q.retry.run(now + Math.ceil(backoffMs), lastError, c.deliveryId, c.claimToken).changes === 1);
  }

  async kill(c: Claimed, lastError: string): Promise<boolean> {
    return this.#write((now) => this.#q.kill.run(now, lastError, c.deliveryId, c.claimToken).changes === 1);
  }

  async extend(cs: Claimed[], leaseMs: number): Promise<string[]> {
    return this.#write((now) =>
      cs.filter((c) => this.#q.extend.run(now + Math.ceil(leaseMs), c.deliveryId, c.claimToken).changes === 1).map((c) => c.deliveryId),
    );
  }

  async release(cs: Claimed[]): Promise<void> {
    this.#write(() => {
      for (const c of cs) this.#q.release.run(c.deliveryId, c.claimToken);
    });
  }

  async purge(policy: PurgePolicy, batch: number): Promise<number> {
    return this.#write((now) => {
      let removed = this.#q.purgeDead.run(now - policy.deadRetentionMs, batch).changes;
      const seqs = this.#q.finishedMessages.all({ a: now - policy.ackedRetentionMs, b: batch }) as number[];
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
      const oldestDue = this.#q.oldestDue.get({ a: topic, b: group, c: now }) as number | null;
      return { pending: live.total - live.leased, leased: live.leased, dead, oldestPendingAgeMs: oldestDue === null ? 0 : now - oldestDue };
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

  async listMessages(topic: string, page: { after?: string; limit: number }): Promise<MessagePage> {
    if (this.#closed) throw new ClosedError('sqlite store is closed');
    // One row more than asked tells whether another page follows.
    const rows = this.#q.listMessages.all(topic, page.after === undefined ? 0 : Number(page.after), page.limit + 1) as MessageRowDb[];
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
}
