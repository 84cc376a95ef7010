/**
 * Claims and fenced writes of the ClickHouse store: which deliveries a claim
 * takes and how it leases them, and how ack, retry, kill, extend and release
 * check the claim token before writing. These are the store's races (a
 * claim against another claim, a fenced write against the claim that takes
 * over an expired lease), so the reasoning about them lives here, in one
 * place, apart from the store's other operations (store.ts).
 *
 * A claim runs under its (topic, group)'s distributed lock. A fenced write
 * takes that lock only when a lease it touches is within a second of
 * expiring (see `fenced`); otherwise a lock inside the process suffices.
 */
import { randomUUID } from 'node:crypto';
import type { Claimed, ClaimRequest } from '../../types.js';
import { takeClaimable } from '../recovered.js';
import type { Connection } from './connection.js';
import { groupKey, wrap } from './connection.js';
import type { SqlValue } from './escape.js';
import { deliveryValues, LEASED, PENDING, PURGED, toDeliveryRow, toMessage } from './rows.js';
import type { DeliveryRecord, DeliveryRow, MessageRecord } from './rows.js';
import { openWindow, rateWait, recordStarts } from './rate-window.js';
import type { ClaimStarts, Window } from './rate-window.js';

/** A row of claim-starts.sql (UInt64 arrives as decimal strings). */
interface StartsRecord {
  l_starts: string[];
  l_counts: Array<number | string>;
  l_ver: string;
}

/** A fenced write whose leases all have longer than this to run skips the distributed lock (see `fenced`). */
const FAST_MARGIN_MS = 1000;

/** Claims and fenced writes on one store handle's connection. */
export class Claims {
  readonly #conn: Connection;
  /** Groups whose last claim here found work (see `claim`). */
  readonly #busy = new Set<string>();
  /**
   * Deliveries whose last fenced write here failed without an answer (a
   * timeout, a cut connection): the version it carried. The server may still
   * apply it later, so the next fenced write of the delivery goes above it
   * (two rows of one version would leave the latest to chance) and runs
   * under the group's distributed lock, where no claim runs. Cleared by the
   * next write that is answered.
   */
  readonly #unanswered = new Map<string, number>();

  constructor(conn: Connection) {
    this.#conn = conn;
  }

  /**
   * Leases up to `req.max` due deliveries of the group (see `Store.claim`):
   * none while the group is paused, and under `req.rateLimit` at most what
   * the group's window has room for (rate-window.ts), recorded before the
   * leases are written (a failure in between over-counts, never under).
   * When the window left a due delivery behind, `req.onRateLimited` hears
   * how long until it has room again.
   */
  async claim(req: ClaimRequest): Promise<Claimed[]> {
    const conn = this.#conn;
    const look = async (now: number): Promise<{ picked: DeliveryRow[]; window?: Window; startsVer?: number; short?: boolean }> => {
      const [live, [reg], [starts]] = await Promise.all([
        conn.rows<DeliveryRecord>('live-deliveries', { topic: req.topic, grp: req.group }),
        conn.rows<{ l_paused: number }>('group-exists', { topic: req.topic, grp: req.group }),
        req.rateLimit ? conn.rows<StartsRecord>('claim-starts', { topic: req.topic, grp: req.group }) : Promise.resolve([]),
      ]);
      if (reg && Number(reg.l_paused) === 1) return { picked: [] };
      let limit = req.max;
      if (req.maxInFlight > 0) {
        const inFlight = live.filter((r) => Number(r.l_state) === LEASED && Number(r.l_lease_until) > now).length;
        limit = Math.min(limit, req.maxInFlight - inFlight);
      }
      if (limit <= 0) return { picked: [] };
      const rows = live.map((r) => toDeliveryRow(req.topic, req.group, r));
      // A delivery whose lease expired is claimed alone (recovered.ts).
      const picked = takeClaimable(pickDue(rows, now, limit), (d) => d.state === LEASED);
      if (!req.rateLimit) return { picked };
      // Taking the window's room as a prefix of what the claim would take
      // without it is the same as picking with the smaller limit.
      const recent = starts ? { starts: starts.l_starts.map(Number), counts: starts.l_counts.map(Number) } : { starts: [], counts: [] };
      const window = openWindow(recent, Math.max(now, conn.clock.now()), req.rateLimit);
      return { picked: picked.slice(0, window.room), window, startsVer: Number(starts?.l_ver ?? 0), short: picked.length > window.room };
    };
    const rateLimited = (recent: ClaimStarts, at: number) => req.onRateLimited?.(rateWait(recent, at, req.rateLimit!));
    // When the group's last claim here found nothing, look without the lock
    // first: a claim that finds nothing due is the same as one made a moment
    // earlier, and idle pollers then never hold up the group's heartbeats and
    // acks. While claims find work, they go straight to the lock.
    conn.assertOpen();
    const key = groupKey(conn.db, req.topic, req.group);
    if (!this.#busy.has(key)) {
      const first = await look(await conn.now());
      if (first.picked.length === 0) {
        if (first.short) rateLimited(first.window!.kept, first.window!.at);
        return [];
      }
    }
    return conn.locked([key], async (now, held) => {
      const { picked, window, startsVer, short } = await look(now);
      if (picked.length === 0) this.#busy.delete(key);
      else if (this.#busy.size < 10_000) this.#busy.add(key);
      if (picked.length === 0) {
        if (short) rateLimited(window!.kept, window!.at);
        return [];
      }
      const messages = new Map(
        (await conn.rows<MessageRecord>('messages-by-id', { topic: req.topic, ids: picked.map((d) => d.messageId) })).map((r) => [r.id, toMessage(req.topic, r)]),
      );
      const writes: SqlValue[][] = [];
      const out: Claimed[] = [];
      // Leases start now, as the rows are written, not when the lock was taken:
      // the reads above would otherwise eat into a short lease.
      const leaseFrom = Math.max(now, conn.clock.now());
      for (const d of picked) {
        const message = messages.get(d.messageId);
        if (!message) {
          // No message row: its append has not committed. One older than a
          // lock's lifetime never will (its appender failed or died), so the
          // delivery is purged and its lane moves on; a younger one waits.
          if (now - d.ver / 1000 > 2 * conn.lockTtlMs) writes.push(deliveryValues({ ...d, state: PURGED, ver: d.ver + 1 }));
          continue;
        }
        const token = randomUUID();
        // ver + 2: a fenced write racing this claim writes ver + 1 and loses (see fenced).
        writes.push(deliveryValues({ ...d, state: LEASED, attempt: d.attempt + 1, token, holder: req.runnerId, leaseUntil: leaseFrom + Math.ceil(req.leaseMs), ver: d.ver + 2 }));
        const c: Claimed = { deliveryId: d.deliveryId, claimToken: token, group: req.group, attempt: d.attempt + 1, message };
        if (d.state === LEASED) c.recovered = true;
        out.push(c);
      }
      let recent = window?.kept;
      if (window && out.length > 0) {
        recent = recordStarts(window, out.length);
        held();
        await conn.insert('insert-claim-starts', [[req.topic, req.group, recent.starts, recent.counts, Math.max(now * 1000, startsVer! + 1)]]);
      }
      held();
      await conn.insert('insert-deliveries', writes);
      if (short) rateLimited(recent!, window!.at);
      return out;
    });
  }

  /**
   * Runs a fenced write for `cs`: per (topic, group), reads the latest
   * versions, keeps the claims whose delivery is still leased under their
   * token, and writes `next(row)` for each. Resolves with the IDs of the
   * claims that were held, in the order of `cs`.
   *
   * Only a claim can race a fenced write (nothing else writes a leased row,
   * and one token has one holder), and a claim takes a leased row only once
   * its lease has expired. So while every lease involved has more than
   * `FAST_MARGIN_MS` to run, the write needs no distributed lock, only this
   * process's lock on the group (its own heartbeats and acks of one delivery
   * must not interleave; a claim token is only ever used by the process that
   * claimed it, as the engine does). Closer to expiry, it runs under the group's
   * distributed lock like a claim. Should a fast write still land after a
   * claim read the row (a stall longer than the margin), the claim's version
   * is the larger (`ver + 2` against `ver + 1`) and wins: the lease was lost,
   * as it would have been had the write come later. So a write answered less
   * than half the margin before its lease's end (or after the distributed
   * lock lapsed) is reported held only once a read under the group's lock
   * finds it still the latest version.
   */
  async fenced(what: string, cs: Claimed[], next: (d: DeliveryRow, now: number) => DeliveryRow): Promise<string[]> {
    const conn = this.#conn;
    conn.assertOpen();
    const byGroup = new Map<string, { topic: string; group: string; cs: Claimed[] }>();
    for (const c of cs) {
      const k = `${c.message.topic}/${c.group}`;
      let e = byGroup.get(k);
      if (!e) byGroup.set(k, (e = { topic: c.message.topic, group: c.group, cs: [] }));
      e.cs.push(c);
    }
    const held = new Set<Claimed>();
    for (const { topic, group, cs: mine } of byGroup.values()) {
      const key = groupKey(conn.db, topic, group);
      // Reads the rows and, when `fast` allows it, writes the next versions; false when the slow path must run.
      const attempt = async (now: number, guard: () => void, fast: boolean): Promise<boolean> => {
        const rows = await conn.rows<DeliveryRecord>('deliveries-by-id', { topic, grp: group, ids: [...new Set(mine.map((c) => c.deliveryId))] });
        const current = new Map(rows.map((r) => [r.delivery_id, toDeliveryRow(topic, group, r)]));
        const writes: SqlValue[][] = [];
        const written = new Set<string>();
        const mineHeld: Claimed[] = [];
        const versions = new Map<string, number>();
        let afterUnanswered = false;
        let soonest = Infinity;
        for (const c of mine) {
          const d = current.get(c.deliveryId);
          if (!d || d.state !== LEASED || d.token !== c.claimToken) continue;
          mineHeld.push(c);
          soonest = Math.min(soonest, d.leaseUntil);
          if (written.has(d.deliveryId)) continue;
          written.add(d.deliveryId);
          const unanswered = this.#unanswered.get(d.deliveryId);
          if (unanswered !== undefined) afterUnanswered = true;
          const ver = Math.max(d.ver, unanswered ?? 0) + 1;
          versions.set(d.deliveryId, ver);
          writes.push(deliveryValues({ ...next(d, now), ver }));
        }
        if (fast && (afterUnanswered || soonest - conn.clock.now() <= FAST_MARGIN_MS)) return false;
        guard();
        try {
          await conn.insert('insert-deliveries', writes);
        } catch (err) {
          for (const [id, ver] of versions) this.#unanswered.set(id, Math.max(ver, this.#unanswered.get(id) ?? 0));
          throw err;
        }
        for (const id of versions.keys()) this.#unanswered.delete(id);
        // A write answered close to a lease's end, without the group's lock
        // (fast) or after it lapsed, may have landed after a claim read the
        // row, and lost to it (the claim's version is the larger): it is held
        // only if it is still the latest version, checked under the group's
        // lock, where no claim runs.
        let lockHeld = !fast;
        if (!fast) {
          try {
            guard();
          } catch {
            lockHeld = false;
          }
        }
        if (!lockHeld && soonest - conn.clock.now() <= FAST_MARGIN_MS / 2) {
          for (const c of mineHeld) unsure.set(c, versions.get(c.deliveryId)!);
          return true;
        }
        for (const c of mineHeld) held.add(c);
        return true;
      };
      const unsure = new Map<Claimed, number>();
      try {
        const local = await conn.local.acquire(key, conn.lockTtlMs);
        try {
          if (await attempt(await conn.now(), () => undefined, true) && unsure.size === 0) continue;
        } finally {
          await local.release();
        }
        const verify = () =>
          conn.locked([key], async () => {
            const local = await conn.local.acquire(key, conn.lockTtlMs);
            try {
              const rows = await conn.rows<DeliveryRecord>('deliveries-by-id', { topic, grp: group, ids: [...new Set([...unsure.keys()].map((c) => c.deliveryId))] });
              const latest = new Map(rows.map((r) => [r.delivery_id, toDeliveryRow(topic, group, r).ver]));
              for (const [c, ver] of unsure) if (latest.get(c.deliveryId) === ver) held.add(c);
            } finally {
              await local.release();
            }
          });
        if (unsure.size > 0) {
          await verify();
          continue;
        }
        await conn.locked([key], async (now, guard) => {
          const local = await conn.local.acquire(key, conn.lockTtlMs);
          try {
            await attempt(now, guard, false);
          } finally {
            await local.release();
          }
        });
        if (unsure.size > 0) await verify();
      } catch (err) {
        throw wrap(err, what);
      }
    }
    return cs.filter((c) => held.has(c)).map((c) => c.deliveryId);
  }
}

/**
 * Up to `limit` due deliveries of `live` (pending or leased, in publish
 * order). Due: pending past its `availableAt`, or leased with an expired
 * lease. A keyed delivery must also head its lane: nothing earlier with its
 * key is live, and nothing else with its key is leased.
 */
export function pickDue(live: DeliveryRow[], now: number, limit: number): DeliveryRow[] {
  const leasedOfKey = new Map<string, number>();
  for (const d of live) if (d.key !== null && d.state === LEASED) leasedOfKey.set(d.key, (leasedOfKey.get(d.key) ?? 0) + 1);
  const laneSeen = new Set<string>();
  const out: DeliveryRow[] = [];
  for (const d of live) {
    if (out.length >= limit) break;
    const due = d.state === PENDING ? d.availableAt <= now : d.leaseUntil <= now;
    if (d.key !== null) {
      const isHead = !laneSeen.has(d.key);
      laneSeen.add(d.key);
      if (!isHead) continue;
      const others = (leasedOfKey.get(d.key) ?? 0) - (d.state === LEASED ? 1 : 0);
      if (others > 0) continue;
    }
    if (due) out.push(d);
  }
  return out;
}
