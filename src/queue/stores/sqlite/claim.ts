/**
 * The SQLite store's claim transaction: what `claim` (and the claim half of
 * `ackAndClaim`) does once it holds the write lock. It reads the group's
 * pause flag, caps the claim by `maxInFlight` and the rate limit, makes the
 * deliveries of messages past the group's cursor where it must, walks the
 * claimable ones in claim order and leases them.
 *
 * Claim order is priority, highest first, then publish order, and deliveries
 * are made lazily: a publish writes only its message, and the group's
 * delivery rows exist exactly for the messages up to its cursor
 * (`cursor_seq`). So a message past the cursor competes with no row. The
 * rule that keeps the order right across the cursor without sorting: *a
 * claim first moves the cursor past the topic's newest message above
 * priority 0* (newest-raised-seq.sql, one probe of a partial index that
 * holds raised messages only). Then every message past the cursor has
 * priority 0 or less, and the order is:
 *
 * 1. rows above priority 0 (claimable-by-priority.sql, 1 to MAX_PRIORITY);
 * 2. rows of priority 0 (claimable.sql), which all lie before the cursor;
 * 3. messages past the cursor, made into rows a chunk at a time in publish
 *    order and walked as in 2 (only the new range);
 * 4. rows below priority 0 (claimable-by-priority.sql again), only once the
 *    cursor reached the newest message, so every message of priority 0 was
 *    seen first.
 *
 * Each is a range of the index of lane heads (ferry_deliveries_heads:
 * topic, grp, priority DESC, message_seq) read in index order and cut off at
 * the claim's limit: no sort of the backlog, which a test checks in the
 * plans. A keyed delivery is claimable only at the head of its lane among
 * live rows, which is the whole lane: an earlier message of its key lies
 * before it in publish order, so before the cursor too (walks 1 and 2 lie
 * before the cursor; 4 runs with nothing past it). The rows behind a head
 * are `blocked` and not in that index (make-delivery.sql marks them, an ack
 * or dead-letter of the head frees the next, unblock-lane.sql), so a lane
 * N deep costs a claim one row, not N probes (migrations/008).
 *
 * The other design, walking an index of messages by priority past the
 * cursor beside the live rows, was left: a claimed message past the cursor
 * would get a row out of cursor order, and every later walk would have to
 * step over those rows one by one (or keep a cursor per priority and check
 * lanes across all of them). The cost of this one: a topic that uses
 * priorities makes its rows up to the newest raised message before
 * choosing, so the first claim after a burst of N raised messages makes up
 * to N rows (in short transactions of `CATCH_UP_CHUNK`, a turn of the event
 * loop apart, so the process is never blocked for long); rows every message
 * gets anyway when it is claimed, only made sooner. A topic without raised
 * messages never pays it, and lowered ones (below 0) never cause it.
 */
import { randomUUID } from 'node:crypto';
import { deliveryId } from '../../delivery-id.js';
import { LEASED } from '../delivery-state.js';
import { MAX_PRIORITY, MIN_PRIORITY } from '../../types.js';
import type { ClaimRequest, Claimed } from '../../types.js';
import { toMessage, type ClaimRowDb } from './rows.js';
import type { Statements } from './sql.js';

/** A claim short of due deliveries makes those of at least this many newer messages at once (`advance`)... */
const ADVANCE_MIN = 256;
/** ...and at most this many chunks per transaction, so the process is never blocked for long behind many scheduled messages. */
const ADVANCE_ROUNDS = 4;
/** Rows a claim makes per transaction while it moves the cursor past the newest raised message. */
export const CATCH_UP_CHUNK = 4096;

/** What one claim transaction did. */
export interface ClaimStep {
  claimed: Claimed[];
  /** It stopped with messages past the cursor left to look at (go on from `cursor` in a new transaction). */
  more: boolean;
  /** Where the next transaction searches new rows from (claimable.sql's @after). */
  cursor: number;
  /**
   * Set when the rate limit held the claim back (it leased all the window
   * allowed, less than it could have otherwise): ms until the window has room
   * for another claim, for `ClaimRequest.onRateLimited`, which the caller
   * calls once the transaction committed.
   */
  rateWaitMs?: number;
}

/**
 * Makes the group's pending deliveries of up to `max` messages past its
 * cursor, in publish order, and moves the cursor past them. Returns the
 * cursor before and after, and how many it made (fewer than `max`: the
 * cursor reached the newest message); none when the group is not
 * registered. Inside a write transaction.
 */
function advance(q: Statements, topic: string, group: string, max: number): { from: number; to: number; made: number } {
  const from = q.groupCursor.get({ topic, grp: group }) as number | undefined;
  if (from === undefined) return { from: 0, to: 0, made: 0 };
  const rows = q.messagesPastCursor.all({ topic, after: from, limit: max }) as Array<{ seq: number; id: string; msg_key: string | null; deliver_at: number | null; priority: number }>;
  if (rows.length === 0) return { from, to: from, made: 0 };
  for (const r of rows) {
    q.makeDelivery.run({ id: deliveryId(r.id, group), seq: r.seq, topic, grp: group, key: r.msg_key, availableAt: r.deliver_at ?? 0, priority: r.priority });
  }
  const to = rows[rows.length - 1]!.seq;
  q.moveCursor.run({ cursor: to, topic, grp: group });
  return { from, to, made: rows.length };
}

/**
 * How many deliveries the claim may lease: `cap`, `req.max` less what
 * `maxInFlight` leaves, and `room`, what the rate limit leaves (Infinity
 * without one). An exact sliding window: the claims started after now -
 * intervalMs count; older records are pruned.
 */
function claimRoom(q: Statements, req: ClaimRequest, now: number): { cap: number; room: number } {
  const key = { topic: req.topic, grp: req.group };
  let cap = req.max;
  if (req.maxInFlight > 0) cap = Math.min(cap, req.maxInFlight - (q.inFlight.get({ ...key, now }) as number));
  if (req.rateLimit === undefined || cap <= 0) return { cap, room: Infinity };
  const since = now - req.rateLimit.intervalMs;
  q.pruneClaimStarts.run({ ...key, since });
  return { cap, room: req.rateLimit.max - (q.claimsInWindow.get({ ...key, since }) as number) };
}

/**
 * Ms from `now` until the group's rate-limit window has room for one more
 * claim: when all but max - 1 of the starts in it have left, that is when
 * the oldest start that must leave is intervalMs old. At least 1.
 */
function rateWait(q: Statements, req: ClaimRequest, now: number): number {
  const { max, intervalMs } = req.rateLimit!;
  const rows = q.claimStarts.all({ topic: req.topic, grp: req.group, since: now - intervalMs }) as Array<{ started_at: number; claims: number }>;
  const leaving = rows.reduce((n, r) => n + r.claims, 0) - max + 1; // how many must leave
  let seen = 0;
  for (const r of rows) {
    seen += r.claims;
    if (seen >= leaving) return Math.max(1, r.started_at + intervalMs - now);
  }
  return 1;
}

/**
 * One claim transaction, inside the write lock, at database time `now`:
 * the claimable deliveries in claim order (see the top of this file), the
 * rows of priority 0 searched only past seq `after` (0: all of them).
 */
export function claimStep(q: Statements, req: ClaimRequest, after: number, now: number): ClaimStep {
  const nothing = { claimed: [], more: false, cursor: after };
  const group = q.groupState.get({ topic: req.topic, grp: req.group }) as { cursor_seq: number; paused: number } | undefined;
  if (group === undefined || group.paused !== 0) return nothing;
  const { cap, room } = claimRoom(q, req, now);
  const limit = Math.min(cap, room);
  if (limit <= 0) return room < cap ? { ...nothing, rateWaitMs: rateWait(q, req, now) } : nothing;

  // Every raised message gets its row before the claim chooses; a long way to go takes several transactions.
  const raised = q.newestRaisedSeq.get({ topic: req.topic }) as number;
  if (raised > group.cursor_seq) {
    const { to, made } = advance(q, req.topic, req.group, CATCH_UP_CHUNK);
    if (to < raised && made > 0) return { claimed: [], more: true, cursor: after };
  }

  const rows: ClaimRowDb[] = [];
  // A delivery whose lease expired is claimed alone (../recovered.ts): the
  // first candidate alone, else every candidate before the first such.
  let stopped = false;
  const take = (found: ClaimRowDb[]): void => {
    for (const r of found) {
      if (r.state === LEASED) {
        if (rows.length === 0) rows.push(r);
        stopped = true;
        return;
      }
      rows.push(r);
    }
  };
  const hasRoom = () => !stopped && rows.length < limit;
  const byPriority = (low: number, high: number) =>
    take(q.claimableByPriority.all({ topic: req.topic, grp: req.group, now, low, high, limit: limit - rows.length }) as ClaimRowDb[]);
  const flat = (from: number) => take(q.claimable.all({ topic: req.topic, grp: req.group, now, after: from, limit: limit - rows.length }) as ClaimRowDb[]);

  byPriority(1, MAX_PRIORITY);
  if (hasRoom()) flat(after);
  const chunk = Math.max(ADVANCE_MIN, 4 * limit);
  let more = false;
  let cursor = after;
  let reachedNewest = false;
  for (let i = 0; i < ADVANCE_ROUNDS && hasRoom(); i++) {
    const { from, to, made } = advance(q, req.topic, req.group, chunk);
    if (made > 0) flat(from);
    cursor = to;
    more = made === chunk;
    if (!more) {
      reachedNewest = true;
      break;
    }
  }
  if (reachedNewest && hasRoom()) byPriority(MIN_PRIORITY, -1);

  const claimed = rows.map((r) => {
    const token = randomUUID();
    q.lease.run({ token, holder: req.runnerId, leaseUntil: now + Math.ceil(req.leaseMs), seq: r.seq, grp: req.group });
    const c: Claimed = { deliveryId: r.delivery_id, claimToken: token, group: req.group, attempt: r.attempt + 1, message: toMessage(r) };
    if (r.state === LEASED) c.recovered = true;
    return c;
  });
  if (req.rateLimit === undefined) return { claimed, more, cursor };
  if (claimed.length > 0) q.recordClaimStarts.run({ topic: req.topic, grp: req.group, now, claims: claimed.length });
  // Held back: the window let it lease fewer than it could have otherwise, and it took them all.
  if (room < cap && claimed.length === room) return { claimed, more, cursor, rateWaitMs: rateWait(q, req, now) };
  return { claimed, more, cursor };
}
