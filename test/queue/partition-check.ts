/**
 * Checks of one partition round (postgres-partition.test.ts, clickhouse-partition.test.ts) from the
 * workers' logs, the store's final rows and its audit of every update of a
 * delivery: no update landed from any worker but the one holding the
 * delivery's latest claim; every message succeeded; the
 * store confirmed exactly one completion per delivery, and for the attempt
 * the store holds last (a write under a lease taken over never landed);
 * every other successful run of a message lost its lease (reported
 * `leaseLost`) or had its ack fail; per key, no message started before the
 * one ahead of it had succeeded.
 */
import assert from 'node:assert/strict';
import { checkKeyOrder } from './chaos-check.js';

export interface PartitionLine {
  w: string;
  g: string;
  t: 's' | 'e' | 'c' | 'r' | 'lost' | 'dead' | 'err';
  at: number;
  id?: string;
  d?: string;
  n?: number;
  key?: string;
  a?: number;
  ok?: boolean;
  lost?: boolean;
  op?: string;
}

export interface FinalRow {
  delivery_id: string;
  message_id: string;
  attempt: number;
  state: number;
}

export interface RoundSummary {
  runs: number;
  duplicates: number;
  explainedByLeaseLost: number;
  explainedByFailedAck: number;
  leaseLost: number;
}

/** Asserts the properties above; `killedAt` ends runs a worker never finished. */
export function checkRound(lines: PartitionLine[], rows: FinalRow[], messages: number, killedAt: number): RoundSummary {
  const runs = lines
    .filter((l) => l.t === 's')
    .map((s) => {
      const e = lines.find((l) => l.t === 'e' && l.w === s.w && l.id === s.id && l.a === s.a);
      return { w: s.w, id: s.id!, n: s.n!, key: s.key!, a: s.a!, at: s.at, end: e?.at ?? killedAt, ok: e?.ok === true };
    });

  // Every message succeeded.
  const successes = new Map<string, typeof runs>();
  for (const r of runs.filter((r) => r.ok)) successes.set(r.id, [...(successes.get(r.id) ?? []), r]);
  assert.equal(successes.size, messages, `messages that never succeeded: ${messages - successes.size}`);

  // Fencing, from the store: at most one confirmed completion per delivery, of
  // its last attempt. None when the ack landed but its answer was lost (the
  // worker then reports a failed ack after the run).
  const ackErrors = lines.filter((l) => l.t === 'err' && l.op === 'ack');
  assert.equal(rows.length, messages, 'one delivery row per message');
  const byId = new Map(rows.map((r) => [r.message_id, r]));
  const completions = new Map<string, PartitionLine[]>();
  for (const c of lines.filter((l) => l.t === 'c')) completions.set(c.id!, [...(completions.get(c.id!) ?? []), c]);
  for (const row of rows) {
    assert.equal(row.state, 2, `${row.message_id} is not acked (state ${row.state})`);
    const cs = completions.get(row.message_id) ?? [];
    if (cs.length === 0) {
      const ok = successes.get(row.message_id)!;
      assert.ok(ok.some((r) => ackErrors.some((e) => e.w === r.w && e.at >= r.end)), `${row.message_id}: acked, with no completion confirmed and no failed ack`);
      continue;
    }
    assert.equal(cs.length, 1, `${row.message_id}: ${cs.length} confirmed completions (${cs.map((c) => `${c.w}#${c.a}`).join(', ')})`);
    assert.equal(cs[0]!.a, row.attempt, `${row.message_id}: completion of attempt ${cs[0]!.a} confirmed on ${cs[0]!.w}, but the store's last claim is attempt ${row.attempt}`);
  }
  for (const r of lines.filter((l) => l.t === 'r')) {
    assert.ok(r.a! < byId.get(r.id!)!.attempt, `${r.id}: a retry of attempt ${r.a} was written on ${r.w} but no later attempt was claimed`);
  }
  assert.equal(lines.filter((l) => l.t === 'dead').length, 0, 'nothing was dead-lettered');

  // Every successful run but the confirmed one is explained by a lost lease or a failed ack.
  const lost = new Set(lines.filter((l) => l.t === 'lost').map((l) => `${l.w} ${l.id} ${l.a}`));
  let duplicates = 0;
  let byLeaseLost = 0;
  let byFailedAck = 0;
  for (const [id, rs] of successes) {
    const confirmed = completions.get(id)?.[0];
    for (const r of rs) {
      if (confirmed && r.w === confirmed.w && r.a === confirmed.a) continue;
      duplicates++;
      if (lost.has(`${r.w} ${r.id} ${r.a}`)) byLeaseLost++;
      else if (ackErrors.some((e) => e.w === r.w && e.at >= r.end)) byFailedAck++;
      else assert.fail(`${id}: attempt ${r.a} on ${r.w} succeeded, was never confirmed, and its worker reported no lost lease or failed ack`);
    }
  }

  // Per key, a message starts only after the one ahead of it succeeded.
  checkKeyOrder(runs, successes);
  return { runs: runs.length, duplicates, explainedByLeaseLost: byLeaseLost, explainedByFailedAck: byFailedAck, leaseLost: lost.size };
}

/** One update of a delivery, as the test's trigger recorded it (in update order per delivery). */
export interface AuditRow {
  n: string;
  delivery_id: string;
  /** The writer's `application_name`: the worker's name. */
  app: string;
  old_state: number;
  new_state: number;
  old_token: string | null;
  new_token: string | null;
}

/**
 * Fencing, from the store's own record: a claim (a new token on a leased
 * row) makes its writer the holder; every other update of the delivery
 * (heartbeat, ack, retry, kill, release) must come from that holder.
 * Returns how many updates were checked.
 */
export function checkFencing(audit: AuditRow[]): number {
  const holder = new Map<string, string>();
  for (const r of [...audit].sort((a, b) => Number(a.n) - Number(b.n))) {
    const claim = r.new_state === 1 && r.new_token !== r.old_token;
    if (claim) {
      holder.set(r.delivery_id, r.app);
      continue;
    }
    assert.equal(r.old_state, 1, `${r.delivery_id}: an update by ${r.app} of a row that was not leased (state ${r.old_state} -> ${r.new_state})`);
    assert.equal(r.app, holder.get(r.delivery_id), `${r.delivery_id}: ${r.app} wrote (state ${r.old_state} -> ${r.new_state}) while ${holder.get(r.delivery_id)} held the latest claim`);
  }
  return audit.length;
}

/** One version row of a delivery, as written (clickhouse-partition.test.ts copies every insert into an audit table). */
export interface VersionRow {
  delivery_id: string;
  state: number;
  attempt: number;
  claim_token: string;
  holder: string;
  ver: number;
}

export interface VersionSummary {
  /** Version rows checked. */
  rows: number;
  /** Claims (a leased row under a token not seen before on the delivery). */
  claims: number;
  /** Writes from a lease that a claim took over, outranked by the claim's version (fenced off). */
  outranked: number;
}

/**
 * Fencing, from versioned rows (the ClickHouse store: a change is a new row
 * with a larger `ver`, and the largest wins). A claim writes the version it
 * read + 2 under a new token; every other write (heartbeat, ack, retry,
 * kill, release, purge) writes the version it read + 1. Per delivery, in
 * version order, asserts: no two rows share a version (a tie would let the
 * server pick either); the first row is a fresh pending one; every claim
 * derives from a pending or leased row 2 below it, one attempt on; every
 * other write derives from the row just below it, a leased one (a pending one
 * for a purge), and keeps its token or clears it. So every write carrying a
 * token carries the token of the claim current, in version order, when it was
 * made. A write from a lease taken over can only sit right below the claim
 * that took it over (it read the same row as the claim and wrote + 1): it is
 * outranked, and counted.
 */
export function checkVersions(rows: VersionRow[]): VersionSummary {
  const byDelivery = new Map<string, VersionRow[]>();
  for (const r of rows) byDelivery.set(r.delivery_id, [...(byDelivery.get(r.delivery_id) ?? []), r]);
  let claims = 0;
  let outranked = 0;
  const show = (r: VersionRow) => `ver ${r.ver} (state ${r.state}, attempt ${r.attempt}, token ${r.claim_token || '-'}, holder ${r.holder || '-'})`;
  for (const [id, rs] of byDelivery) {
    rs.sort((a, b) => a.ver - b.ver);
    const at = new Map<number, VersionRow>();
    for (const r of rs) {
      const tie = at.get(r.ver);
      if (tie) assert.fail(`${id}: two rows share version ${r.ver}: ${show(tie)} and ${show(r)}`);
      at.set(r.ver, r);
    }
    const first = rs[0]!;
    assert.ok(first.state === 0 && first.claim_token === '' && first.attempt === 0, `${id}: its first row is not a fresh pending one: ${show(first)}`);
    const tokens = new Set<string>();
    for (const r of rs.slice(1)) {
      if (r.state === 1 && r.claim_token !== '' && !tokens.has(r.claim_token)) {
        claims++;
        tokens.add(r.claim_token);
        const p = at.get(r.ver - 2);
        assert.ok(p !== undefined && (p.state === 0 || p.state === 1), `${id}: the claim ${show(r)} derives from no pending or leased row (${p ? show(p) : 'none'} 2 below)`);
        assert.equal(r.attempt, p.attempt + 1, `${id}: the claim ${show(r)} does not follow ${show(p)} by one attempt`);
        if (at.has(r.ver - 1)) outranked++;
        continue;
      }
      const p = at.get(r.ver - 1);
      assert.ok(p !== undefined, `${id}: ${show(r)} derives from no row`);
      if (p.state === 0) {
        assert.equal(r.state, 4, `${id}: ${show(r)} was written from the pending ${show(p)}`);
        continue;
      }
      assert.equal(p.state, 1, `${id}: ${show(r)} was written from ${show(p)}, which is not leased`);
      assert.ok(r.claim_token === p.claim_token || (r.claim_token === '' && r.state === 0), `${id}: ${show(r)} was written under another token than ${show(p)}, the claim current at its version`);
      // A row a claim outranks (the claim took its parent, 2 below) has no
      // successor: the only version above it is the claim's, and versions are distinct.
    }
  }
  return { rows: rows.length, claims, outranked };
}
