/**
 * The SQLite store's claim never sorts the backlog: with 20,000 deliveries
 * live across ten priorities (some keyed, some finished) every statement a
 * claim transaction runs (claim.ts, and the acks of ackAndClaim) finds its
 * rows through an index, in the order it wants them (the walks read only the
 * heads of key lanes, ferry_deliveries_heads). EXPLAIN QUERY PLAN of each
 * has no "USE TEMP B-TREE" (a sort, or a DISTINCT) and reads no table
 * or index whole ("SCAN"), with SQLite's default guesses and again after
 * ANALYZE has measured the tables.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { prepare, type StatementName } from '../../src/queue/stores/sqlite/sql.js';
import { SqliteStore } from '../../src/queue/stores/sqlite/store.js';
import { claimReq, msg } from '../stores/helpers.js';

/** Every statement of a claim transaction, in the order claim.ts runs them. */
const CLAIM_STATEMENTS: StatementName[] = [
  'ack', 'unblockLane', 'groupState', 'inFlight', 'pruneClaimStarts', 'claimsInWindow', 'newestRaisedSeq', 'groupCursor', 'messagesPastCursor', 'makeDelivery',
  'moveCursor', 'claimableByPriority', 'claimable', 'lease', 'recordClaimStarts', 'claimStarts',
];

/** A value for each named parameter a statement takes. */
const VALUES: Record<string, unknown> = {
  topic: 't', grp: 'g', now: Date.now(), limit: 16, after: 0, low: 1, high: 2 ** 31 - 1, since: 0, claims: 1, cursor: 1, seq: 1, id: 'x',
  key: 'k1', error: 'e', unrun: 0, availableAt: 0, priority: 0, token: 'x', holder: 'h', leaseUntil: 1, cutoff: Date.now(),
};

/** Statements off the claim's path that read live rows: stats (live-stats.sql, oldest-due.sql, which count blocked rows through the lane index) and the dead-letter write. */
const OTHER_STATEMENTS: StatementName[] = ['liveStats', 'oldestDue', 'kill'];

/** The statements of the janitor's message purge (store.ts, purge), which walks messages without an index by due time (migrations/007). */
const JANITOR_STATEMENTS: StatementName[] = ['recordSeqMark', 'finishedMessages', 'pruneSeqMarks'];

function planOf(db: Database.Database, name: StatementName): string[] {
  const text = prepare(db, name).source;
  const params = Object.fromEntries([...new Set([...text.matchAll(/@([A-Za-z]+)/g)].map((m) => m[1]!))].map((p) => [p, VALUES[p]]));
  return (db.prepare(`EXPLAIN QUERY PLAN ${text}`).all(params) as Array<{ detail: string }>).map((r) => r.detail);
}

describe('sqlite store: claim plans', () => {
  let dir: string;
  let path: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ferry-sqlite-plans-'));
    path = join(dir, 'q.db');
    const s = await SqliteStore.open({ path, synchronous: 'normal' });
    try {
      await s.ensureGroup('t', 'g', 'earliest');
      await s.ensureGroup('t', 'other', 'earliest');
      for (let i = 0; i < 20_000; i += 1000) {
        await s.append(Array.from({ length: 1000 }, (_, j) => msg('t', { key: j % 7 === 0 ? `k${j % 5}` : undefined, priority: (i + j) % 10 })));
      }
      // Rows made for both groups (raised messages make a claim make them all); a few hundred finished.
      for (const g of ['g', 'other']) await s.ack(await s.claim(claimReq('t', g, { max: 300 })));
      await s.claim(claimReq('t', 'g', { max: 16, rateLimit: { max: 100, intervalMs: 60_000 } }));
    } finally {
      await s.close();
    }
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  for (const analyzed of [false, true]) {
    it(`no claim statement sorts or scans${analyzed ? ' after ANALYZE' : ''}`, () => {
      const db = new Database(path);
      try {
        if (analyzed) db.exec('ANALYZE');
        const problems: string[] = [];
        for (const name of CLAIM_STATEMENTS) {
          for (const step of planOf(db, name)) {
            if (/USE TEMP B-TREE|^SCAN/.test(step)) problems.push(`${name}: ${step}`);
          }
        }
        assert.deepEqual(problems, []);
        // The claim walks read the index of lane heads in its own order.
        assert.match(planOf(db, 'claimableByPriority')[0]!, /^SEARCH d USING INDEX ferry_deliveries_heads \(topic=\? AND grp=\? AND priority>\? AND priority<\?\)/);
        assert.match(planOf(db, 'claimable')[0]!, /^SEARCH d USING INDEX ferry_deliveries_heads \(topic=\? AND grp=\? AND priority=\? AND message_seq>\?\)/);
        // A new row looks for a live one of its key, and an ack's lane finds its next row, by a seek in the lane index.
        assert.ok(planOf(db, 'makeDelivery').some((step) => /^SEARCH e USING (COVERING )?INDEX ferry_deliveries_lane \(topic=\? AND grp=\? AND msg_key=\? AND message_seq<\?\)/.test(step)));
        assert.ok(planOf(db, 'unblockLane').some((step) => /^SEARCH ferry_deliveries USING (COVERING )?INDEX ferry_deliveries_lane \(topic=\? AND grp=\? AND msg_key=\?\)/.test(step)));
      } finally {
        db.close();
      }
    });

    it(`stats and the dead-letter write read live rows through an index${analyzed ? ' after ANALYZE' : ''}`, () => {
      const db = new Database(path);
      try {
        if (analyzed) db.exec('ANALYZE');
        const problems: string[] = [];
        for (const name of OTHER_STATEMENTS) {
          for (const step of planOf(db, name)) {
            if (/USE TEMP B-TREE|^SCAN (?!CONSTANT ROW)/.test(step)) problems.push(`${name}: ${step}`);
          }
        }
        assert.deepEqual(problems, []);
      } finally {
        db.close();
      }
    });

    it(`the janitor walks messages in seq order up to its mark, without a sort${analyzed ? ' after ANALYZE' : ''}`, () => {
      const db = new Database(path);
      try {
        if (analyzed) db.exec('ANALYZE');
        const problems: string[] = [];
        for (const name of JANITOR_STATEMENTS) {
          for (const step of planOf(db, name)) {
            if (/USE TEMP B-TREE|^SCAN (?!CONSTANT ROW)/.test(step)) problems.push(`${name}: ${step}`);
          }
        }
        assert.deepEqual(problems, []);
        assert.match(planOf(db, 'finishedMessages')[0]!, /^SEARCH m USING INTEGER PRIMARY KEY \(rowid<\?\)/);
      } finally {
        db.close();
      }
    });
  }
});
