/**
 * Checks of a multi-process run from its workers' logs of handler starts and
 * ends (one JSON line each, written synchronously so a SIGKILL loses nothing
 * logged): every message succeeded; every extra success follows a kill of
 * the earlier run's worker, a lost lease (the handler aborted, or a leaseLost
 * event for that run, e.g. an ack refused as not held) or an ack its worker
 * reported failed (it may have landed or not); per key, no message started
 * before the one ahead of it had succeeded; no more than `maxInFlight`
 * handlers of the group ever ran at once.
 */
import assert from 'node:assert/strict';

export interface Line {
  w: string;
  g: string;
  /** Handler start, handler end, a leaseLost event, an error the engine reported (`op`). */
  t: 's' | 'e' | 'lost' | 'err';
  op?: string;
  id: string;
  n: number;
  key: string;
  a: number;
  at: number;
  ok?: boolean;
  lost?: boolean;
}

/** A handler run read from the logs: its start line, when it ended, and how. */
export interface Run {
  id: string;
  n: number;
  key: string;
  at: number;
  end: number;
}

/** Per key, no message started before the one ahead of it had succeeded (`successes`: the successful runs of each message ID). */
export function checkKeyOrder(runs: Run[], successes: Map<string, Run[]>, label = ''): void {
  const byKey = new Map<string, Run[]>();
  for (const r of runs) byKey.set(r.key, [...(byKey.get(r.key) ?? []), r]);
  for (const [key, rs] of byKey) {
    rs.sort((a, b) => a.at - b.at);
    for (let i = 1; i < rs.length; i++) {
      const prev = rs[i - 1]!;
      const cur = rs[i]!;
      assert.ok(cur.n >= prev.n, `${label}${key}: message ${cur.n} started after ${prev.n}`);
      if (cur.n > prev.n) assert.ok(successes.get(prev.id)!.some((s) => s.end <= cur.at), `${label}${key}: ${cur.n} started before ${prev.n} had succeeded`);
    }
  }
}

/** Asserts the properties above for group `g`; returns counts for the test's summary line. */
export function checkGroup(lines: Line[], kills: Map<string, number>, g: string, messages: number, maxInFlight: number): { runs: number; duplicates: number; peak: number } {
  const mine = lines.filter((l) => l.g === g);
  const runs = mine
    .filter((l) => l.t === 's')
    .map((s) => {
      const e = mine.find((l) => l.t === 'e' && l.w === s.w && l.id === s.id && l.a === s.a);
      return { ...s, end: e?.at ?? kills.get(s.w)!, ok: e?.ok === true, lost: e?.lost === true };
    });
  assert.ok(runs.every((r) => r.end !== undefined), 'every unfinished run belongs to a killed worker');

  const successes = new Map<string, typeof runs>();
  for (const r of runs.filter((r) => r.ok)) successes.set(r.id, [...(successes.get(r.id) ?? []), r]);
  assert.equal(successes.size, messages, `${g}: messages that never succeeded: ${messages - successes.size}`);
  const lostEvents = new Set(mine.filter((l) => l.t === 'lost').map((l) => `${l.w} ${l.id} ${l.a}`));
  const ackErrors = mine.filter((l) => l.t === 'err' && l.op === 'ack');
  let duplicates = 0;
  for (const rs of successes.values()) {
    rs.sort((a, b) => a.at - b.at);
    for (let i = 1; i < rs.length; i++) {
      duplicates++;
      const prev = rs[i - 1]!;
      const killedAt = kills.get(prev.w);
      const explained = prev.lost
        || lostEvents.has(`${prev.w} ${prev.id} ${prev.a}`)
        || ackErrors.some((e) => e.w === prev.w && e.at >= prev.end)
        || (killedAt !== undefined && killedAt >= prev.end && killedAt <= rs[i]!.at);
      assert.ok(explained, `${g}: ${prev.id} succeeded twice (on ${prev.w}, then ${rs[i]!.w}) without a kill, lost lease or failed ack between`);
    }
  }

  checkKeyOrder(runs, successes, `${g}/`);

  const events = runs.flatMap((r) => [
    { at: r.at, d: 1 },
    { at: r.end, d: -1 },
  ]);
  events.sort((a, b) => a.at - b.at || a.d - b.d);
  let running = 0;
  let peak = 0;
  for (const e of events) peak = Math.max(peak, (running += e.d));
  assert.ok(peak <= maxInFlight, `${g}: ${peak} handlers ran at once`);
  return { runs: runs.length, duplicates, peak };
}
