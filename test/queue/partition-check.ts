/**
 * Checks of one partition round (postgres-partition.test.ts) from the
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
