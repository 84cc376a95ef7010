/**
 * `verifyQueue` over the damage table: for every row it reports each damage
 * at the segment and position where a drain meets it, and changes nothing
 * (every file's bytes are the same afterwards, and a queue opened afterwards
 * still finds and books the damage itself).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { verifyQueue } from '../../../src/diskqueue/index.js';
import { FaultyFileSystem, openQ, drainAll, DIR } from './helpers.js';
import { rows, buildStore, TOTAL, COMMITTED, type DamageRow } from './damage-table.js';

/** What verify calls the damage a drain reports as `reason`. */
const VERIFY_REASON: Record<string, string> = { 'header-rebuilt': 'header-checksum' };

/** Damage the verifier must report for `row`. */
function expected(row: DamageRow) {
  const out = row.events.map((e, i) => ({ segment: e.segment, position: e.position, reason: row.verifyReasons?.[i] ?? VERIFY_REASON[e.reason] ?? e.reason }));
  // A foreign segment is no loss event for a drain, but verify names it.
  if (row.foreignSegments) out.push({ segment: 3, position: 0, reason: 'segment-version' });
  return out;
}

function snapshot(fs: FaultyFileSystem): Map<string, string> {
  return new Map(fs.readdir(DIR).sort().map((n) => [n, Buffer.from(fs.readFile(`${DIR}/${n}`)!).toString('hex')]));
}

describe('verifyQueue over the damage table', () => {
  it('a clean store verifies clean', async () => {
    const fs = await buildStore();
    const report = await verifyQueue(DIR, { fs });
    assert.equal(report.ok, true);
    assert.deepEqual(report.damage, []);
    assert.equal(report.segments, 3);
    assert.equal(report.records, TOTAL - 60);
    assert.equal(report.committedRecords, COMMITTED - 60);
  });

  for (const row of rows) {
    it(row.name, async () => {
      const fs = await buildStore();
      row.damage(fs);
      const before = snapshot(fs);
      const report = await verifyQueue(DIR, { fs });
      assert.deepEqual(snapshot(fs), before, 'verify changed nothing');
      assert.deepEqual(
        report.damage.map((d) => ({ segment: d.segment, position: d.position, reason: d.reason })),
        expected(row),
      );
      assert.equal(report.ok, expected(row).length === 0);
      // The queue, opened afterwards, still meets all of it.
      const q = await openQ(fs);
      const got = await drainAll(q.reader());
      assert.equal(got.errors.length, row.events.length);
      await q.close();
    });
  }
});
