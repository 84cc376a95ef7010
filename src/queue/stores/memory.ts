/**
 * The in-process store: everything lives in maps inside one process and is
 * lost on exit. For tests and single-instance use. Several `MemoryStore`
 * handles may share one `MemoryBacking`, which is how tests model several
 * instances of a service consuming one group.
 *
 * Each (topic, group) keeps its pending and leased deliveries in claim
 * order, priority then publish order, with its pause flag and rate-limit
 * window (memory-group.ts). A claim walks them once, taking due deliveries
 * that head their key lane. The rate limit is counted per backing, so every
 * handle on it (every "instance") shares one window.
 */
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { ClosedError, InvalidArgumentError } from '../../errors.js';
import { deliveryId } from '../delivery-id.js';
import type { DeliveryState } from './delivery-state.js';
import { GroupDeliveries } from './memory-group.js';
import { parseSeqCursor } from './seq-cursor.js';
import type { ScheduleRecord } from '../schedules/types.js';
import type { ClaimRequest, Claimed, ConsumerGroup, KillOptions, MessagePage, PurgePolicy, StartFrom, Store, StoreCapabilities, StoreStats, StoredMessage } from '../types.js';
import { knownKeys, rejectUnknownKeys } from '../../known-keys.js';

interface MessageRow {
  /** Publish order across the backing: the `listMessages` cursor. */
  seq: number;
  msg: StoredMessage;
  /** When the message becomes due: `deliverAt`, else its publish time (ms). */
  dueAt: number;
  deliveries: Set<DeliveryRow>;
}

interface DeliveryRow {
  id: string;
  row: MessageRow;
  laneKey: string; // topic + "\0" + group
  /** The message's, copied here for the group's order (memory-group.ts). */
  priority: number;
  key: string | undefined;
  state: DeliveryState;
  attempt: number;
  availableAt: number;
  leaseUntil: number;
  token: string | undefined;
  holder: string | undefined;
  lastError: string | undefined;
  finishedAt: number;
}

const laneOf = (topic: string, group: string): string => `${topic}\u0000${group}`;
const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** The maps behind a `MemoryBacking`; reachable only from this module. */
class MemoryState {
  readonly now: () => number;
  readonly groups = new Map<string, Set<string>>();
  readonly messages = new Map<string, MessageRow>();
  readonly topicMessages = new Map<string, Set<MessageRow>>();
  readonly deliveries = new Map<string, DeliveryRow>();
  /** Pending and leased deliveries per (topic, group), in claim order, with the group's pause flag and rate-limit window. */
  readonly active = new Map<string, GroupDeliveries<DeliveryRow>>();
  /** Dead deliveries, in order of death. */
  readonly dead = new Set<DeliveryRow>();
  readonly deadCount = new Map<string, number>();
  readonly events = new EventEmitter();
  janitor: { holder: string; until: number } | undefined;
  lastSeq = 0;
  /** Schedules by name, each a private copy. */
  readonly schedules = new Map<string, ScheduleRecord>();

  constructor(now: () => number) {
    this.now = now;
    this.events.setMaxListeners(0);
  }

  activeSet(lane: string): GroupDeliveries<DeliveryRow> {
    let s = this.active.get(lane);
    if (!s) this.active.set(lane, (s = new GroupDeliveries()));
    return s;
  }
}

const states = new WeakMap<MemoryBacking, MemoryState>();

/**
 * The data behind one or more `MemoryStore` handles. Pass one backing to
 * several stores to model several instances of a service sharing a queue.
 */
export class MemoryBacking {
  /** `now` (ms since the epoch, default `Date.now`) is the store's clock; tests may pass their own. */
  constructor(opts: { now?: () => number } = {}) {
    states.set(this, new MemoryState(opts.now ?? Date.now));
  }
}

/** Options of `MemoryStore`. */
export interface MemoryStoreOptions {
  /** Share state with other handles (several "instances"); a new backing by default. */
  backing?: MemoryBacking;
}

const MEMORY_STORE_OPTION_KEYS = knownKeys<MemoryStoreOptions>({ backing: true });

function copySchedule(r: ScheduleRecord): ScheduleRecord {
  const out: ScheduleRecord = { name: r.name, revision: r.revision, spec: structuredClone(r.spec), payload: r.payload.slice(), updatedAt: new Date(r.updatedAt) };
  if (r.lastTick !== undefined) out.lastTick = new Date(r.lastTick);
  return out;
}

function copyMessage(m: StoredMessage): StoredMessage {
  const out: StoredMessage = { id: m.id, topic: m.topic, payload: m.payload.slice(), publishedAt: new Date(m.publishedAt) };
  if (m.key !== undefined) out.key = m.key;
  if (m.headers !== undefined) out.headers = { ...m.headers };
  if (m.deliverAt !== undefined) out.deliverAt = new Date(m.deliverAt);
  if (m.priority !== undefined && m.priority !== 0) out.priority = m.priority;
  return out;
}

/** A claimable delivery at `now`: pending and due, or leased with its lease run out. */
function isDue(d: DeliveryRow, now: number): boolean {
  return d.state === 'pending' ? d.availableAt <= now : d.leaseUntil <= now;
}

/**
 * A `Store` kept in process memory (queue type `memory`). Single process;
 * nothing survives a restart. Implements the optional `listen` (wake-ups from
 * the other handles on the same backing), `acquireJanitor`, `setGroupPaused`
 * and the schedule methods, and orders claims by priority and counts rate
 * limits (`capabilities`).
 */
export class MemoryStore implements Store {
  /** The data this handle works on. */
  readonly backing: MemoryBacking;
  readonly capabilities: StoreCapabilities = { priority: true, rateLimit: true };
  readonly #state: MemoryState;
  #closed = false;

  constructor(opts: MemoryStoreOptions = {}) {
    rejectUnknownKeys('memory store option', opts, MEMORY_STORE_OPTION_KEYS);
    if (opts.backing !== undefined && !(opts.backing instanceof MemoryBacking)) throw new InvalidArgumentError('memory store: backing must be a MemoryBacking');
    this.backing = opts.backing ?? new MemoryBacking();
    this.#state = states.get(this.backing)!;
  }

  #open(): MemoryState {
    if (this.#closed) throw new ClosedError('memory store is closed');
    return this.#state;
  }

  #newDelivery(b: MemoryState, row: MessageRow, group: string): void {
    const id = deliveryId(row.msg.id, group);
    if (b.deliveries.has(id)) return;
    const lane = laneOf(row.msg.topic, group);
    const d: DeliveryRow = {
      id, row, laneKey: lane, priority: row.msg.priority ?? 0, key: row.msg.key, state: 'pending', attempt: 0, availableAt: row.msg.deliverAt?.getTime() ?? 0,
      leaseUntil: 0, token: undefined, holder: undefined, lastError: undefined, finishedAt: 0,
    };
    b.deliveries.set(id, d);
    row.deliveries.add(d);
    b.activeSet(lane).add(d);
  }

  async ensureGroup(topic: string, group: string, startFrom: StartFrom): Promise<void> {
    const b = this.#open();
    let groups = b.groups.get(topic);
    if (!groups) b.groups.set(topic, (groups = new Set()));
    if (groups.has(group)) return;
    groups.add(group);
    if (startFrom !== 'earliest') return;
    for (const row of b.topicMessages.get(topic) ?? []) this.#newDelivery(b, row, group);
  }

  async append(msgs: StoredMessage[]): Promise<void> {
    const b = this.#open();
    const topics = new Set<string>();
    for (const m of msgs) {
      if (b.messages.has(m.id)) continue;
      const msg = copyMessage(m);
      const row: MessageRow = { seq: ++b.lastSeq, msg, dueAt: (msg.deliverAt ?? msg.publishedAt).getTime(), deliveries: new Set() };
      b.messages.set(msg.id, row);
      let set = b.topicMessages.get(msg.topic);
      if (!set) b.topicMessages.set(msg.topic, (set = new Set()));
      set.add(row);
      for (const g of b.groups.get(msg.topic) ?? []) this.#newDelivery(b, row, g);
      topics.add(msg.topic);
    }
    for (const t of topics) this.#notify(b, t);
  }

  /** Tells the other handles on this backing that `topic` may have claimable work. */
  #notify(b: MemoryState, topic: string): void {
    b.events.emit('wake', topic, this);
  }

  async claim(req: ClaimRequest): Promise<Claimed[]> {
    const b = this.#open();
    const group = b.active.get(laneOf(req.topic, req.group));
    if (!group || group.paused) return [];
    const now = b.now();
    let cap = req.max;
    if (req.maxInFlight > 0) {
      let held = 0;
      for (const d of group) if (d.state === 'leased' && d.leaseUntil > now) held++;
      cap = Math.min(cap, req.maxInFlight - held);
    }
    const rate = req.rateLimit;
    const room = rate === undefined ? Infinity : group.rateRoom(rate, now);
    const limit = Math.min(cap, room);
    const out: Claimed[] = [];
    let heldBack = false; // a due delivery was left for want of room
    for (const d of group) {
      if (!isDue(d, now) || !group.isHead(d)) continue;
      if (out.length >= limit) {
        heldBack = true;
        break;
      }
      // A delivery whose lease expired is claimed alone (recovered.ts), in claim order.
      const recovered = d.state === 'leased';
      if (recovered && out.length > 0) break;
      d.state = 'leased';
      d.attempt++;
      d.token = randomUUID();
      d.holder = req.runnerId;
      d.leaseUntil = now + req.leaseMs;
      const c: Claimed = { deliveryId: d.id, claimToken: d.token, group: req.group, attempt: d.attempt, message: copyMessage(d.row.msg) };
      if (recovered) c.recovered = true;
      out.push(c);
      if (recovered) break;
    }
    if (rate !== undefined) {
      if (out.length > 0) group.recordStarts(now, out.length);
      if (heldBack && room < cap) req.onRateLimited?.(group.rateWait(rate, now));
    }
    return out;
  }

  /** See `Store.duePairs`: the pairs with a delivery a claim would take now (ignoring `maxInFlight` and rate limits); paused groups are left out. */
  async duePairs(pairs: readonly ConsumerGroup[]): Promise<ConsumerGroup[]> {
    const b = this.#open();
    const now = b.now();
    const out: ConsumerGroup[] = [];
    for (const p of pairs) {
      const group = b.active.get(laneOf(p.topic, p.group));
      if (!group || group.paused) continue;
      for (const d of group) {
        if (isDue(d, now) && group.isHead(d)) {
          out.push({ topic: p.topic, group: p.group });
          break;
        }
      }
    }
    return out;
  }

  /** See `Store.setGroupPaused`. Resuming wakes the other handles on this backing (`listen`). */
  async setGroupPaused(topic: string, group: string, paused: boolean): Promise<boolean> {
    const b = this.#open();
    if (b.groups.get(topic)?.has(group) !== true) return false;
    b.activeSet(laneOf(topic, group)).paused = paused;
    if (!paused) this.#notify(b, topic);
    return true;
  }

  /** The live row `c` still holds, or undefined when its token is stale. */
  #held(b: MemoryState, c: Claimed): DeliveryRow | undefined {
    const d = b.deliveries.get(c.deliveryId);
    return d && d.state === 'leased' && d.token === c.claimToken ? d : undefined;
  }

  #finish(b: MemoryState, d: DeliveryRow, state: Exclude<DeliveryState, 'leased'>): void {
    d.state = state;
    d.token = undefined;
    d.holder = undefined;
    d.leaseUntil = 0;
    if (state === 'pending') return;
    d.finishedAt = b.now();
    b.active.get(d.laneKey)?.delete(d);
    if (state === 'dead') {
      b.dead.add(d);
      b.deadCount.set(d.laneKey, (b.deadCount.get(d.laneKey) ?? 0) + 1);
    }
  }

  async ack(cs: Claimed[]): Promise<string[]> {
    const b = this.#open();
    const held: string[] = [];
    const freed = new Set<string>(); // topics where a key lane moved on
    for (const c of cs) {
      const d = this.#held(b, c);
      if (!d) continue;
      this.#finish(b, d, 'acked');
      held.push(d.id);
      if (d.row.msg.key !== undefined) freed.add(d.row.msg.topic);
    }
    for (const t of freed) this.#notify(b, t);
    return held;
  }

  async retry(c: Claimed, backoffMs: number, lastError: string): Promise<boolean> {
    const b = this.#open();
    const d = this.#held(b, c);
    if (!d) return false;
    this.#finish(b, d, 'pending');
    d.availableAt = b.now() + backoffMs;
    d.lastError = lastError;
    return true;
  }

  async kill(c: Claimed, lastError: string, opts?: KillOptions): Promise<boolean> {
    const b = this.#open();
    const d = this.#held(b, c);
    if (!d) return false;
    d.lastError = lastError;
    if (opts?.unrun) d.attempt--;
    this.#finish(b, d, 'dead');
    if (d.row.msg.key !== undefined) this.#notify(b, d.row.msg.topic);
    return true;
  }

  async extend(cs: Claimed[], leaseMs: number): Promise<string[]> {
    const b = this.#open();
    const now = b.now();
    const held: string[] = [];
    for (const c of cs) {
      const d = this.#held(b, c);
      if (!d) continue;
      d.leaseUntil = now + leaseMs;
      held.push(d.id);
    }
    return held;
  }

  async release(cs: Claimed[]): Promise<void> {
    const b = this.#open();
    const topics = new Set<string>();
    for (const c of cs) {
      const d = this.#held(b, c);
      if (!d) continue;
      this.#finish(b, d, 'pending');
      d.attempt--; // the claim's attempt was never spent
      topics.add(d.row.msg.topic);
    }
    for (const t of topics) this.#notify(b, t);
  }

  async purge(policy: PurgePolicy, batch: number): Promise<number> {
    const b = this.#open();
    const now = b.now();
    let removed = 0;
    const deadCutoff = now - policy.deadRetentionMs;
    let n = 0;
    for (const d of b.dead) {
      if (n >= batch) break;
      if (d.finishedAt >= deadCutoff) continue;
      b.dead.delete(d);
      b.deliveries.delete(d.id);
      d.row.deliveries.delete(d);
      b.deadCount.set(d.laneKey, (b.deadCount.get(d.laneKey) ?? 1) - 1);
      n++;
    }
    removed += n;
    const cutoff = now - policy.ackedRetentionMs;
    n = 0;
    for (const row of b.messages.values()) {
      if (n >= batch) break;
      if (row.dueAt >= cutoff) continue;
      let done = true;
      for (const d of row.deliveries) {
        if (d.state !== 'acked' || d.finishedAt >= cutoff) {
          done = false;
          break;
        }
      }
      if (!done) continue;
      for (const d of row.deliveries) b.deliveries.delete(d.id);
      b.messages.delete(row.msg.id);
      b.topicMessages.get(row.msg.topic)?.delete(row);
      n++;
    }
    return removed + n;
  }

  async stats(topic: string, group: string): Promise<StoreStats> {
    const b = this.#open();
    const lane = laneOf(topic, group);
    const now = b.now();
    let pending = 0;
    let leased = 0;
    let oldestDue = Infinity;
    for (const d of b.active.get(lane) ?? []) {
      if (d.state === 'leased' && d.leaseUntil > now) {
        leased++;
        continue;
      }
      pending++;
      // When it became claimable: its due time or backoff end, or its lease's expiry.
      const due = d.state === 'pending' ? Math.max(d.availableAt, d.row.dueAt) : d.leaseUntil;
      if (due <= now && due < oldestDue) oldestDue = due;
    }
    const oldestPendingAgeMs = oldestDue === Infinity ? 0 : now - oldestDue;
    return { pending, leased, dead: b.deadCount.get(lane) ?? 0, oldestPendingAgeMs, paused: b.active.get(lane)?.paused === true };
  }

  async ping(): Promise<void> {
    this.#open();
  }

  async removeGroup(topic: string, group: string): Promise<boolean> {
    const b = this.#open();
    const groups = b.groups.get(topic);
    const existed = groups?.delete(group) ?? false;
    if (groups?.size === 0) b.groups.delete(topic);
    const lane = laneOf(topic, group);
    b.active.delete(lane);
    b.deadCount.delete(lane);
    const id = (row: MessageRow) => deliveryId(row.msg.id, group);
    for (const row of b.topicMessages.get(topic) ?? []) {
      const d = b.deliveries.get(id(row));
      if (!d) continue;
      b.deliveries.delete(d.id);
      row.deliveries.delete(d);
      b.dead.delete(d);
    }
    return existed;
  }

  async listGroups(topic?: string): Promise<ConsumerGroup[]> {
    const b = this.#open();
    const out: ConsumerGroup[] = [];
    for (const [t, gs] of b.groups) {
      if (topic !== undefined && t !== topic) continue;
      for (const group of gs) out.push({ topic: t, group });
    }
    return out.sort((x, y) => cmp(x.topic, y.topic) || cmp(x.group, y.group));
  }

  /** Walks the topic's rows from the start to the cursor: linear in the topic's retained messages per page. */
  async listMessages(topic: string, page: { after?: string; limit: number }): Promise<MessagePage> {
    const b = this.#open();
    const after = parseSeqCursor(page.after);
    const messages: StoredMessage[] = [];
    let last = 0;
    for (const row of b.topicMessages.get(topic) ?? []) {
      if (row.seq <= after) continue;
      if (messages.length === page.limit) return { messages, next: String(last) };
      messages.push(copyMessage(row.msg));
      last = row.seq;
    }
    return { messages };
  }

  /** See `Store.putSchedule`. */
  async putSchedule(r: ScheduleRecord): Promise<boolean> {
    const b = this.#open();
    if (b.schedules.get(r.name)?.revision === r.revision) return false;
    const stored = copySchedule(r);
    delete stored.lastTick;
    b.schedules.set(r.name, stored);
    return true;
  }

  /** See `Store.deleteSchedule`. */
  async deleteSchedule(name: string): Promise<boolean> {
    return this.#open().schedules.delete(name);
  }

  /** See `Store.listSchedules`. */
  async listSchedules(): Promise<ScheduleRecord[]> {
    const b = this.#open();
    return [...b.schedules.values()].sort((x, y) => cmp(x.name, y.name)).map(copySchedule);
  }

  /** See `Store.advanceSchedule`. */
  async advanceSchedule(name: string, revision: string, tick: Date): Promise<boolean> {
    const r = this.#open().schedules.get(name);
    if (r?.revision !== revision) return false;
    if (r.lastTick === undefined || r.lastTick < tick) r.lastTick = new Date(tick);
    return true;
  }

  async close(): Promise<void> {
    this.#closed = true;
  }

  /**
   * Calls `wake(topic)` whenever another handle on this backing publishes to
   * `topic`, acks or kills a keyed delivery on it (freeing the next of its
   * lane), releases deliveries of it or resumes one of its groups; until
   * `signal` aborts. This handle's
   * own writes are left out: the queue that made them wakes its own
   * subscriptions.
   */
  async listen(signal: AbortSignal, wake: (topic: string) => void): Promise<void> {
    const b = this.#open();
    if (signal.aborted) return;
    const onWake = (topic: string, from: MemoryStore) => {
      if (from !== this) wake(topic);
    };
    await new Promise<void>((resolve) => {
      b.events.on('wake', onWake);
      signal.addEventListener('abort', () => {
        b.events.off('wake', onWake);
        resolve();
      }, { once: true });
    });
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async acquireJanitor(holder: string, ttlMs: number): Promise<boolean> {
    const b = this.#open();
    const now = b.now();
    if (b.janitor && b.janitor.holder !== holder && b.janitor.until > now) return false;
    b.janitor = { holder, until: now + ttlMs };
    return true;
  }
}
