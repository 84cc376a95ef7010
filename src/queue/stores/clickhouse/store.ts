/**
 * The ClickHouse store (queue type `clickhouse`). `@clickhouse/client` is
 * imported only when a store is opened.
 *
 * ClickHouse has no row locks and no transactions, so every read-then-write
 * runs under a distributed lock (Bifrost's queue package requires one to
 * consume on ClickHouse): appends, group registrations and purges lock their
 * topics; claims lock their (topic, group) (reading the group's pause and
 * rate-limit window under it), and so do writes fenced on a claim token
 * (ack, retry, kill, extend, release) when a lease they touch is within a
 * second of expiring (see claim.ts); pausing a group locks both; schedule
 * writes lock their schedule (schedules.ts). Without a `locker` the store
 * uses a process-local one, which serialises this instance only: publishing
 * works, consuming is refused with `NoLockerError` (`canConsume`).
 *
 * A change is never an UPDATE: it is a new row with a larger version in a
 * ReplacingMergeTree, and every read takes each key's latest version
 * (`argMax(column, ver)`), so background merges never change what is read.
 * Purged rows get a tombstone version. Leases and due times are milliseconds
 * on the server's clock (see clock.ts). The statements live in `sql/`, the
 * schema in numbered migrations (`migrations/`, applied on open by
 * migrate.ts). This file holds the store's operations; the connection, its
 * locking and clock are in connection.ts, claims and fenced writes in claim.ts,
 * the rate-limit window in rate-window.ts, schedules in schedules.ts.
 */
import { EventEmitter } from 'node:events';
import type { ClickHouseClient } from '@clickhouse/client';
import { ClosedError, InvalidArgumentError, NoLockerError } from '../../../errors.js';
import { MAX_TIMER_MS } from '../../options.js';
import { deliveryId } from '../../delivery-id.js';
import type { DistributedLocker } from '../../lockers/types.js';
import type { ScheduleRecord } from '../../schedules/types.js';
import type { Claimed, ClaimRequest, ConsumerGroup, KillOptions, MessagePage, PurgePolicy, StartFrom, Store, StoreCapabilities, StoreStats, StoredMessage } from '../../types.js';
import { parseSeqCursor } from '../seq-cursor.js';
import { Claims } from './claim.js';
import { Connection, groupKey, loadDriver, serverClock, SETTINGS, topicKey, wrap } from './connection.js';
import type { SqlValue } from './escape.js';
import { migrate } from './migrate.js';
import { ACKED, DEAD, deliveryValues, messageValues, PENDING, PURGED, toMessage } from './rows.js';
import type { DeliveryRow, MessageRecord } from './rows.js';
import { Schedules } from './schedules.js';
import { DEFAULT_CLICKHOUSE_DATABASE, quoteDatabase, statements } from './sql.js';
import { knownKeys, rejectUnknownKeys } from '../../../known-keys.js';

/** Options of `ClickHouseStore.open`. */
export interface ClickHouseStoreOptions {
  /** HTTP endpoint, e.g. `http://127.0.0.1:8123`. The store opens (and closes) its own client. */
  url?: string;
  /** A `@clickhouse/client` client to borrow instead; the store never closes it. */
  client?: ClickHouseClient;
  /** User for `url`. Default `default`. */
  username?: string;
  /** Password for `url`. Default empty. */
  password?: string;
  /** Database holding the queue's tables, created when missing. Identifier, default `ferry`. */
  database?: string;
  /** The lock shared by every instance: required to consume (see `canConsume`). */
  locker?: DistributedLocker;
  /** How long one operation may hold a lock, ms; an operation that would write past it fails instead. Default 30000. */
  lockTtlMs?: number;
  /**
   * Longest wait for the answer to one HTTP request, ms (ignored with
   * `client`: set the client's `request_timeout`). A request past it is
   * abandoned and the call rejects with a transient `IOError`. Keep it well
   * under the queue's `leaseDurationMs` (30000 by default), and under
   * `lockTtlMs`: a write held in the network longer than its lock lives could
   * land after another instance's claim of the same delivery (not checked
   * here). Default 10000.
   */
  requestTimeoutMs?: number;
}

const CLICKHOUSE_STORE_OPTION_KEYS = knownKeys<ClickHouseStoreOptions>({
  url: true,
  client: true,
  username: true,
  password: true,
  database: true,
  locker: true,
  lockTtlMs: true,
  requestTimeoutMs: true,
});

const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;

const DEFAULT_LOCK_TTL_MS = 30_000;
/** Rows of a backfill page. */
const BACKFILL_PAGE = 5000;

/**
 * Wake-ups between handles on one database in this process: the event name
 * is the endpoint and database, the arguments the topic and the handle that
 * wrote. Other processes are not told (they poll).
 */
const wakeEvents = new EventEmitter().setMaxListeners(0);

/**
 * A `Store` in a ClickHouse database (queue type `clickhouse`). Safe to share
 * between instances when they share a `locker`. Implements `canConsume`,
 * `acquireJanitor`, `setGroupPaused`, rate limits, the schedule methods,
 * and a wake source (`listen`) that reaches only the
 * handles on the same endpoint and database in this process (other
 * processes poll). Use `ClickHouseStore.open`.
 */
export class ClickHouseStore implements Store {
  readonly #conn: Connection;
  readonly #claims: Claims;
  readonly #schedules: Schedules;
  /**
   * Rate limits are counted under the claim's lock. Priorities are not
   * supported: every read of a delivery takes its latest version from all of
   * them (a `GROUP BY` over the group's rows), so a claim reads and sorts the
   * group's whole backlog whatever order it asks for; no index can hand out
   * the highest priority first (docs/QUEUE.md, "The ClickHouse store").
   */
  readonly capabilities: StoreCapabilities = { priority: false, rateLimit: true };
  /** Whether the store opened its client (and so closes it). */
  readonly #owns: boolean;
  /** The `wakeEvents` channel of this endpoint and database. */
  readonly #channel: string;
  /** Aborts on close: ends `listen`. */
  readonly #closing = new AbortController();
  /** The first `close()`'s run, which every call returns. */
  #shutdown: Promise<void> | undefined;

  private constructor(conn: Connection, owns: boolean, channel: string) {
    this.#conn = conn;
    this.#claims = new Claims(conn);
    this.#schedules = new Schedules(conn);
    this.#owns = owns;
    this.#channel = channel;
  }

  /**
   * Connects, creates the database when missing, applies the migrations it
   * has not recorded (migrate.ts), and calibrates the server clock (up to
   * 1.5 s, once per endpoint and process).
   *
   * @throws InvalidArgumentError neither or both of `url` and `client`, a bad database name or `lockTtlMs`.
   * @throws IOError the server is unreachable or refuses the schema.
   */
  static async open(opts: ClickHouseStoreOptions): Promise<ClickHouseStore> {
    rejectUnknownKeys('clickhouse store option', opts, CLICKHOUSE_STORE_OPTION_KEYS);
    const hasUrl = typeof opts?.url === 'string' && opts.url !== '';
    if (hasUrl === (opts?.client !== undefined)) throw new InvalidArgumentError('clickhouse store needs exactly one of url and client');
    const db = opts.database ?? DEFAULT_CLICKHOUSE_DATABASE;
    const quoted = quoteDatabase(db);
    const sql = statements(quoted);
    const lockTtlMs = opts.lockTtlMs ?? DEFAULT_LOCK_TTL_MS;
    if (!Number.isInteger(lockTtlMs) || lockTtlMs < 100 || lockTtlMs > MAX_TIMER_MS) throw new InvalidArgumentError(`clickhouse store: lockTtlMs must be an integer from 100 to ${MAX_TIMER_MS}`);
    if (opts.locker !== undefined && typeof opts.locker?.acquire !== 'function') throw new InvalidArgumentError('clickhouse store: locker must have an acquire method');
    const requestTimeoutMs = opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    if (!Number.isInteger(requestTimeoutMs) || requestTimeoutMs < 1 || requestTimeoutMs > MAX_TIMER_MS) {
      throw new InvalidArgumentError(`clickhouse store: requestTimeoutMs must be an integer from 1 to ${MAX_TIMER_MS}, got ${typeof requestTimeoutMs === 'string' ? JSON.stringify(requestTimeoutMs) : String(requestTimeoutMs)}`);
    }
    for (const k of ['username', 'password'] as const) {
      if (opts[k] !== undefined && typeof opts[k] !== 'string') throw new InvalidArgumentError(`clickhouse store: ${k} must be a string`);
    }
    // A borrowed client brings its own credentials and timeout: these would be ignored.
    const forUrl = (['username', 'password', 'requestTimeoutMs'] as const).filter((k) => opts[k] !== undefined);
    if (!hasUrl && forUrl.length > 0) throw new InvalidArgumentError(`clickhouse store: ${forUrl.join(', ')} apply only with url (a client brings its own)`);
    let client = opts.client;
    if (!client) {
      const { createClient, ClickHouseLogLevel } = await loadDriver();
      try {
        client = createClient({
          url: opts.url,
          username: opts.username ?? 'default',
          password: opts.password ?? '',
          clickhouse_settings: SETTINGS,
          request_timeout: requestTimeoutMs,
          log: { level: ClickHouseLogLevel.OFF },
        });
      } catch (err) {
        // The driver checks the URL here (a plain Error).
        throw new InvalidArgumentError(`clickhouse store: ${(err as Error)?.message ?? String(err)}`);
      }
    }
    const owns = opts.client === undefined;
    try {
      await migrate(client, sql, db, quoted);
      const endpoint = hasUrl ? opts.url! : `client:${db}`;
      const clock = await serverClock(endpoint, client, sql);
      return new ClickHouseStore(new Connection(client, db, sql, opts.locker, lockTtlMs, clock), owns, `${endpoint}\n${db}`);
    } catch (err) {
      if (owns) await client.close().catch(() => undefined);
      throw wrap(err, `opening database ${db}`);
    }
  }

  /** The database this store uses. */
  get database(): string {
    return this.#conn.db;
  }

  /** Refuses to consume without a shared locker: claims and fenced writes would race across instances. */
  canConsume(): void {
    if (!this.#conn.locker) throw new NoLockerError('clickhouse store: consuming needs a distributed locker shared by every instance (the store was opened without `locker`)');
  }

  async ensureGroup(topic: string, group: string, startFrom: StartFrom): Promise<void> {
    await this.#conn.locked([topicKey(this.#conn.db, topic)], async (now, held) => {
      const [reg] = await this.#conn.rows<GroupState>('group-exists', { topic, grp: group });
      if (reg && Number(reg.l_deleted) === 0) return;
      if (startFrom === 'earliest') {
        // Deliveries a failed earlier registration left keep their state;
        // purged ones (a removed group's) are made anew above their tombstone.
        const have = new Map(
          (await this.#conn.rows<{ delivery_id: string; l_state: number; l_ver: string }>('group-delivery-ids', { topic, grp: group })).map((r) => [
            r.delivery_id,
            { purged: Number(r.l_state) === PURGED, ver: Number(r.l_ver) },
          ]),
        );
        for (let after = 0; ; ) {
          const page = await this.#conn.rows<{ id: string; l_seq: string; l_key: string | null; l_deliver_at: string | null }>('backfill-page', { topic, after, limit: BACKFILL_PAGE });
          if (page.length === 0) break;
          const rows: SqlValue[][] = [];
          for (const m of page) {
            const id = deliveryId(m.id, group);
            const prior = have.get(id);
            if (prior && !prior.purged) continue;
            const d = newDelivery(topic, group, id, m.id, Number(m.l_seq), m.l_key, m.l_deliver_at === null ? 0 : this.#serverTime(Number(m.l_deliver_at)), now);
            if (prior) d.ver = Math.max(d.ver, prior.ver + 1);
            rows.push(deliveryValues(d));
          }
          held();
          await this.#conn.insert('insert-deliveries', rows);
          after = Number(page[page.length - 1]!.l_seq);
          if (page.length < BACKFILL_PAGE) break;
        }
      }
      held();
      // Last: the registration commits the group (above a removal's version).
      await this.#conn.insert('insert-groups', [[topic, group, now, 0, 0, Math.max(now * 1000, Number(reg?.l_ver ?? 0) + 1)]]);
    });
  }

  async append(msgs: StoredMessage[]): Promise<void> {
    this.#conn.assertOpen();
    if (msgs.length === 0) return;
    const unique: StoredMessage[] = [];
    const seen = new Set<string>();
    for (const m of msgs) if (!seen.has(m.id)) (seen.add(m.id), unique.push(m));
    const topics = [...new Set(unique.map((m) => m.topic))];
    await this.#conn.locked(topics.map((t) => topicKey(this.#conn.db, t)), async (now, held) => {
      const [seqs, groups, existing] = await Promise.all([
        this.#conn.rows<{ topic: string; l_next_seq: string }>('topic-sequences', { topics }),
        this.#conn.rows<{ topic: string; grp: string }>('groups-of', { topics }),
        this.#conn.rows<{ id: string }>('live-message-ids', { topics, ids: unique.map((m) => m.id) }),
      ]);
      const exists = new Set(existing.map((r) => r.id));
      const fresh = unique.filter((m) => !exists.has(m.id));
      if (fresh.length === 0) return;
      const next = new Map(seqs.map((r) => [r.topic, Number(r.l_next_seq)]));
      const groupsOf = new Map<string, string[]>();
      for (const g of groups) {
        let gs = groupsOf.get(g.topic);
        if (!gs) groupsOf.set(g.topic, (gs = []));
        gs.push(g.grp);
      }
      const ver = now * 1000;
      const messageRows: SqlValue[][] = [];
      const deliveryRows: SqlValue[][] = [];
      for (const m of fresh) {
        const seq = next.get(m.topic) ?? 1;
        next.set(m.topic, seq + 1);
        messageRows.push(messageValues(m, seq, ver));
        const availableAt = m.deliverAt === undefined ? 0 : this.#serverTime(m.deliverAt.getTime());
        for (const g of groupsOf.get(m.topic) ?? []) {
          deliveryRows.push(deliveryValues(newDelivery(m.topic, g, deliveryId(m.id, g), m.id, seq, m.key ?? null, availableAt, now)));
        }
      }
      const touched = new Set(fresh.map((m) => m.topic));
      held();
      // Sequence numbers and deliveries first (a failure after them only
      // leaves a gap, and deliveries no claim hands out), then the messages:
      // a message row is the commit point.
      await Promise.all([
        this.#conn.insert('insert-topics', [...touched].map((t) => [t, next.get(t)!, next.get(t)!])),
        this.#conn.insert('insert-deliveries', deliveryRows),
      ]);
      held();
      await this.#conn.insert('insert-messages', messageRows);
      this.#notify(touched);
    });
  }

  /**
   * `deliverAt` (an instant on this process's clock, ms) as a deadline on the
   * server clock estimate, at least 1 (0 means "due at once"): the same time
   * from now on both clocks. A subscription's wake-up at `deliverAt` then
   * finds the delivery due even while the estimate runs a few milliseconds
   * behind the server (a coarse server clock reads late).
   */
  #serverTime(deliverAt: number): number {
    return Math.max(1, this.#conn.clock.now() + (deliverAt - Date.now()));
  }

  /** Tells other handles on this database in this process that `topics` may have claimable work. */
  #notify(topics: Iterable<string>): void {
    if (wakeEvents.listenerCount(this.#channel) === 0) return;
    for (const t of new Set(topics)) wakeEvents.emit(this.#channel, t, this);
  }

  /** The topics of the keyed claims of `cs` whose IDs are in `held`: their lanes moved on. */
  #notifyKeyed(cs: Claimed[], held: string[], keyedOnly: boolean): void {
    const ids = new Set(held);
    this.#notify(cs.filter((c) => ids.has(c.deliveryId) && (!keyedOnly || c.message.key !== undefined)).map((c) => c.message.topic));
  }

  async #ack(cs: Claimed[]): Promise<string[]> {
    const held = await this.#claims.fenced('ack', cs, (d, now) => ({ ...d, state: ACKED, finishedAt: now, leaseUntil: 0 }));
    this.#notifyKeyed(cs, held, true);
    return held;
  }

  async #retry(c: Claimed, backoffMs: number, lastError: string): Promise<boolean> {
    const held = await this.#claims.fenced('retry', [c], (d, now) => ({ ...d, state: PENDING, availableAt: now + Math.ceil(backoffMs), lastError, token: '', holder: '', leaseUntil: 0 }));
    return held.length === 1;
  }

  /** With `opts.unrun` the claim's attempt is taken back, as `release` does: it ran no handler. */
  async #kill(c: Claimed, lastError: string, opts?: KillOptions): Promise<boolean> {
    const unrun = opts?.unrun === true;
    const held = await this.#claims.fenced('kill', [c], (d, now) => ({ ...d, state: DEAD, attempt: unrun ? Math.max(0, d.attempt - 1) : d.attempt, finishedAt: now, lastError, leaseUntil: 0 }));
    this.#notifyKeyed([c], held, true);
    return held.length === 1;
  }

  #extend(cs: Claimed[], leaseMs: number): Promise<string[]> {
    return this.#claims.fenced('extend', cs, (d, now) => ({ ...d, leaseUntil: now + Math.ceil(leaseMs) }));
  }

  async #release(cs: Claimed[]): Promise<void> {
    const held = await this.#claims.fenced('release', cs, (d) => ({ ...d, state: PENDING, attempt: Math.max(0, d.attempt - 1), token: '', holder: '', leaseUntil: 0 }));
    this.#notifyKeyed(cs, held, false);
  }

  async #purge(policy: PurgePolicy, batch: number): Promise<number> {
    const now = await this.#conn.now();
    let removed = 0;
    // Dead rows first: a message whose dead row goes now may then be finished.
    const dead = await this.#conn.rows<{ topic: string; delivery_id: string }>('purge-dead-candidates', { cutoff: Math.max(0, now - Math.floor(policy.deadRetentionMs)), batch });
    for (const [topic, ids] of byTopic(dead.map((r) => [r.topic, r.delivery_id]))) {
      await this.#conn.locked([topicKey(this.#conn.db, topic)], async (_now, held) => {
        held();
        await this.#conn.exec('tombstone-dead', { topic, ids });
      });
      removed += ids.length;
    }
    const cutoff = Math.max(0, now - Math.floor(policy.ackedRetentionMs));
    const done = await this.#conn.rows<{ topic: string; id: string }>('purge-message-candidates', { cutoff, batch });
    for (const [topic, candidates] of byTopic(done.map((r) => [r.topic, r.id]))) {
      await this.#conn.locked([topicKey(this.#conn.db, topic)], async (_now, held) => {
        const ids = (await this.#conn.rows<{ id: string }>('purge-messages-recheck', { topic, ids: candidates, cutoff })).map((r) => r.id);
        if (ids.length === 0) return;
        held();
        await this.#conn.exec('tombstone-acked-of-messages', { topic, ids });
        await this.#conn.exec('tombstone-messages', { topic, ids });
        removed += ids.length;
      });
    }
    return removed;
  }

  async #stats(topic: string, group: string): Promise<StoreStats> {
    const now = await this.#conn.now();
    const [[r], [reg]] = await Promise.all([
      this.#conn.rows<{ live: string; leased: string; dead: string; due: string; oldest_due: string }>('stats', { topic, grp: group, now }),
      this.#conn.rows<GroupState>('group-exists', { topic, grp: group }),
    ]);
    const live = Number(r!.live);
    const leased = Number(r!.leased);
    const oldestPendingAgeMs = Number(r!.due) > 0 ? Math.max(0, now - Number(r!.oldest_due)) : 0;
    const paused = reg !== undefined && Number(reg.l_deleted) === 0 && Number(reg.l_paused) === 1;
    return { pending: live - leased, leased, dead: Number(r!.dead), oldestPendingAgeMs, paused };
  }

  /**
   * Writes a version of the group with `paused`, under the topic's lock (as
   * registrations and removals, which write the same row) and the group's
   * (as claims, which read it): once this resolves, no claim that read the
   * group as it was is still to write. A resume wakes the topic's other
   * handles in this process.
   */
  async #setGroupPaused(topic: string, group: string, paused: boolean): Promise<boolean> {
    const db = this.#conn.db;
    const registered = await this.#conn.locked([topicKey(db, topic), groupKey(db, topic, group)], async (now, held) => {
      const [reg] = await this.#conn.rows<GroupState>('group-exists', { topic, grp: group });
      if (!reg || Number(reg.l_deleted) !== 0) return false;
      if (Number(reg.l_paused) === (paused ? 1 : 0)) return true;
      held();
      await this.#conn.insert('insert-groups', [[topic, group, Number(reg.l_created_at), 0, paused ? 1 : 0, Math.max(now * 1000, Number(reg.l_ver) + 1)]]);
      return true;
    });
    if (registered && !paused) this.#notify([topic]);
    return registered;
  }

  /**
   * Under the topic's lock (as appends and registrations): tombstones every
   * delivery of the group (their leases are lost), then marks the group
   * removed. A failure part-way leaves the group registered; calling again
   * finishes the job.
   */
  async removeGroup(topic: string, group: string): Promise<boolean> {
    return this.#conn.locked([topicKey(this.#conn.db, topic)], async (now, held) => {
      const [reg] = await this.#conn.rows<GroupState>('group-exists', { topic, grp: group });
      held();
      await this.#conn.exec('tombstone-group-deliveries', { topic, grp: group });
      if (!reg || Number(reg.l_deleted) !== 0) return false;
      held();
      await this.#conn.insert('insert-groups', [[topic, group, now, 1, 0, Math.max(now * 1000, Number(reg.l_ver) + 1)]]);
      return true;
    });
  }

  async listGroups(topic?: string): Promise<ConsumerGroup[]> {
    const rows = await this.#conn.rows<{ topic: string; grp: string }>('list-groups', { all: topic === undefined ? 1 : 0, topic: topic ?? '' });
    return rows.map((r) => ({ topic: r.topic, group: r.grp }));
  }

  async listMessages(topic: string, page: { after?: string; limit: number }): Promise<MessagePage> {
    const after = parseSeqCursor(page.after);
    // One row more than asked tells whether another page follows.
    const rows = await this.#conn.rows<MessageRecord>('list-messages', { topic, after, limit: page.limit + 1 });
    const more = rows.length > page.limit;
    if (more) rows.pop();
    const out: MessagePage = { messages: rows.map((r) => toMessage(topic, r)) };
    if (more) out.next = String(rows[rows.length - 1]!.l_seq);
    return out;
  }

  /**
   * Calls `wake(topic)` whenever another handle on the same endpoint and
   * database in this process publishes to `topic`, acks or kills a keyed
   * delivery on it (freeing the next of its lane), releases deliveries of
   * it, or resumes a group of it; until `signal` aborts or this store
   * closes. Other processes are not heard: they are found by polling.
   */
  async listen(signal: AbortSignal, wake: (topic: string) => void): Promise<void> {
    this.#conn.assertOpen();
    if (signal.aborted) return;
    const onWake = (topic: string, from: ClickHouseStore) => {
      if (from !== this) wake(topic);
    };
    wakeEvents.on(this.#channel, onWake);
    try {
      await new Promise<void>((resolve) => {
        signal.addEventListener('abort', () => resolve(), { once: true });
        this.#closing.signal.addEventListener('abort', () => resolve(), { once: true });
      });
    } finally {
      wakeEvents.off(this.#channel, onWake);
    }
  }

  async #ping(): Promise<void> {
    this.#conn.assertOpen();
    let res: { success: boolean; error?: Error };
    try {
      res = await this.#conn.client.ping();
    } catch (err) {
      throw wrap(err, 'ping');
    }
    if (!res.success) throw wrap(res.error ?? new Error('no answer'), 'ping');
  }

  async acquireJanitor(holder: string, ttlMs: number): Promise<boolean> {
    return this.#conn.locked([`ferry/${this.#conn.db}/janitor`], async (now, held) => {
      const [r] = await this.#conn.rows<{ l_holder: string; l_until: string; l_ver: string }>('janitor-holder');
      if (r && r.l_holder !== '' && r.l_holder !== holder && Number(r.l_until) > now) return false;
      held();
      await this.#conn.insert('insert-janitor', [['janitor', holder, now + Math.ceil(ttlMs), Math.max(Number(r?.l_ver ?? 0) + 1, now * 1000)]]);
      return true;
    });
  }

  /**
   * The store's calls below take an optional last `signal`: when it aborts
   * the call rejects at once with `ClosedError`. Its HTTP request is not cut
   * short; it ends by itself within `requestTimeoutMs`.
   */
  claim(req: ClaimRequest, signal?: AbortSignal): Promise<Claimed[]> {
    return this.#abortable('claim', signal, () => this.#claims.claim(req));
  }

  /** See `Store.duePairs` (sql/due-pairs.sql): one read, no lock. */
  duePairs(pairs: readonly ConsumerGroup[], signal?: AbortSignal): Promise<ConsumerGroup[]> {
    return this.#abortable('duePairs', signal, async () => {
      this.#conn.assertOpen();
      if (pairs.length === 0) return [];
      const asked = new Set(pairs.map((p) => `${p.topic}\u0000${p.group}`));
      const rows = await this.#conn.rows<{ topic: string; grp: string }>('due-pairs', {
        topics: [...new Set(pairs.map((p) => p.topic))], groups: [...new Set(pairs.map((p) => p.group))], now: await this.#conn.now(),
      });
      return rows.filter((r) => asked.has(`${r.topic}\u0000${r.grp}`)).map((r) => ({ topic: r.topic, group: r.grp }));
    });
  }

  ack(cs: Claimed[], signal?: AbortSignal): Promise<string[]> {
    return this.#abortable('ack', signal, () => this.#ack(cs));
  }

  retry(c: Claimed, backoffMs: number, lastError: string, signal?: AbortSignal): Promise<boolean> {
    return this.#abortable('retry', signal, () => this.#retry(c, backoffMs, lastError));
  }

  kill(c: Claimed, lastError: string, opts?: KillOptions, signal?: AbortSignal): Promise<boolean> {
    return this.#abortable('kill', signal, () => this.#kill(c, lastError, opts));
  }

  extend(cs: Claimed[], leaseMs: number, signal?: AbortSignal): Promise<string[]> {
    return this.#abortable('extend', signal, () => this.#extend(cs, leaseMs));
  }

  release(cs: Claimed[], signal?: AbortSignal): Promise<void> {
    return this.#abortable('release', signal, () => this.#release(cs));
  }

  purge(policy: PurgePolicy, batch: number, signal?: AbortSignal): Promise<number> {
    return this.#abortable('purge', signal, () => this.#purge(policy, batch));
  }

  stats(topic: string, group: string, signal?: AbortSignal): Promise<StoreStats> {
    return this.#abortable('stats', signal, () => this.#stats(topic, group));
  }

  /** See `Store.setGroupPaused`. */
  setGroupPaused(topic: string, group: string, paused: boolean, signal?: AbortSignal): Promise<boolean> {
    return this.#abortable('setGroupPaused', signal, () => this.#setGroupPaused(topic, group, paused));
  }

  /** See `Store.putSchedule` (schedules.ts). Instants before 1970 are refused (`InvalidArgumentError`): the table keeps unsigned milliseconds. */
  putSchedule(r: ScheduleRecord, signal?: AbortSignal): Promise<boolean> {
    return this.#abortable('putSchedule', signal, () => this.#schedules.put(r));
  }

  deleteSchedule(name: string, signal?: AbortSignal): Promise<boolean> {
    return this.#abortable('deleteSchedule', signal, () => this.#schedules.delete(name));
  }

  listSchedules(signal?: AbortSignal): Promise<ScheduleRecord[]> {
    return this.#abortable('listSchedules', signal, () => this.#schedules.list());
  }

  advanceSchedule(name: string, revision: string, tick: Date, signal?: AbortSignal): Promise<boolean> {
    return this.#abortable('advanceSchedule', signal, () => this.#schedules.advance(name, revision, tick));
  }

  ping(signal?: AbortSignal): Promise<void> {
    return this.#abortable('ping', signal, () => this.#ping());
  }

  /** `run()`, unless `signal` aborts first: then a `ClosedError` at once (`run` goes on, bounded by the request timeout). */
  #abortable<T>(what: string, signal: AbortSignal | undefined, run: () => Promise<T>): Promise<T> {
    if (!signal) return run();
    const closed = () => new ClosedError(`clickhouse store: ${what} abandoned: its signal aborted (the queue is closing)`);
    if (signal.aborted) return Promise.reject(closed());
    const running = run();
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => reject(closed());
      signal.addEventListener('abort', onAbort, { once: true });
      running.then(
        (v) => (signal.removeEventListener('abort', onAbort), resolve(v)),
        (e: unknown) => (signal.removeEventListener('abort', onAbort), reject(e)),
      );
    });
  }

  /**
   * Closes the client when the store opened it; a borrowed client (and the
   * locker) stay open. Idempotent: a call made while another runs resolves
   * when that one does.
   */
  close(): Promise<void> {
    this.#shutdown ??= this.#close();
    return this.#shutdown;
  }

  async #close(): Promise<void> {
    const closing = this.#conn.close();
    this.#closing.abort();
    await closing;
    if (this.#owns) await this.#conn.client.close().catch(() => undefined);
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** A row of group-exists.sql. */
interface GroupState {
  l_deleted: number;
  l_paused: number;
  l_created_at: string;
  l_ver: string;
}

/** A new pending delivery, first version. */
function newDelivery(topic: string, grp: string, id: string, messageId: string, seq: number, key: string | null, availableAt: number, now: number): DeliveryRow {
  return { topic, grp, deliveryId: id, messageId, seq, key, state: PENDING, attempt: 0, availableAt, leaseUntil: 0, token: '', holder: '', lastError: '', finishedAt: 0, ver: now * 1000 };
}

/** Pairs grouped by their first element, in first-seen order. */
function byTopic(pairs: Array<[string, string]>): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const [t, id] of pairs) {
    let l = m.get(t);
    if (!l) m.set(t, (l = []));
    l.push(id);
  }
  return m;
}
