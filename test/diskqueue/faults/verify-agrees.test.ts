/**
 * `verifyQueue` predicts what an open and a full drain lose, and nothing
 * else: a run of missing segment numbers is one entry whatever its length,
 * damage inside records already consumed is no loss, and a segment lost whole
 * costs what the open's own estimate says.
 *
 * The store is the damage table's (test/diskqueue/faults/damage-table.ts): segment 1
 * reclaimed, segment 2 holding records 60–119 with 60–69 committed, segment 3
 * holding 120–179, segment 4 (the tail) 180–184; 68 framed bytes a record.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { verifyQueue, type VerifyReport } from '../../../src/diskqueue/index.js';
import { HEADER_SIZE } from '../../../src/diskqueue/format.js';
import { openQ, drainAll, flipByte, patch, segPath, range, DIR, type FaultyFileSystem } from './helpers.js';
import { buildStore, at, rec, FRAME, PER_SEGMENT, TOTAL, COMMITTED } from './damage-table.js';

const sum = (r: VerifyReport, k: 'lostRecords' | 'lostBytes') => r.damage.reduce((n, d) => n + (d[k] ?? 0), 0);

/** Opens and drains the store: what the open booked, and what came out. */
async function openAndDrain(fs: FaultyFileSystem) {
  const q = await openQ(fs);
  const { lostRecords, lostBytes, lostSegments } = q.stats();
  const got = await drainAll(q.reader());
  await q.close();
  return { lostRecords, lostBytes, lostSegments, ...got };
}

describe('verifyQueue: a run of missing segment numbers', () => {
  // Not a benchmark: one entry per missing number took minutes and then ran
  // out of heap. The timeout is a hang bound; the check takes milliseconds.
  it('a stray segment numbered 99999999 is one segment-missing entry, found in bounded time and memory', { timeout: 120_000 }, async () => {
    const fs = await buildStore();
    fs.writeFile(segPath(99_999_999), fs.readFile(segPath(4))!);
    const report = await verifyQueue(DIR, { fs });
    const count = 99_999_999 - 5;
    // Estimated from segment 4, the nearest survivor before the run: 5 records.
    assert.deepEqual(report.damage, [
      { segment: 5, lastSegment: 99_999_998, position: 0, reason: 'segment-missing', lostBytes: count * 5 * FRAME, lostRecords: count * 5 },
    ]);
    assert.equal(report.segments, 4);
  });

  it('three missing numbers are one entry costing what the open books for them', async () => {
    const fs = await buildStore();
    fs.rename(segPath(4), segPath(7));
    const report = await verifyQueue(DIR, { fs });
    assert.deepEqual(report.damage, [
      { segment: 4, lastSegment: 6, position: 0, reason: 'segment-missing', lostBytes: 3 * PER_SEGMENT * FRAME, lostRecords: 3 * PER_SEGMENT },
    ]);
    const opened = await openAndDrain(fs);
    assert.equal(opened.lostSegments, 3);
    assert.equal(sum(report, 'lostRecords'), opened.lostRecords);
    assert.equal(sum(report, 'lostBytes'), opened.lostBytes);
  });

  it('one missing number is an entry whose lastSegment is its own number', async () => {
    const fs = await buildStore();
    fs.remove(segPath(3));
    const report = await verifyQueue(DIR, { fs });
    assert.deepEqual(report.damage, [
      { segment: 3, lastSegment: 3, position: 0, reason: 'segment-missing', lostBytes: PER_SEGMENT * FRAME, lostRecords: PER_SEGMENT },
    ]);
  });
});

describe('verifyQueue: damage in records already consumed is no loss', () => {
  it('a length prefix flipped inside the committed prefix: nothing reported, and a drain loses nothing', async () => {
    const fs = await buildStore();
    patch(fs, segPath(2), at(2), [0x7e]); // record 62, committed; 0x7e frames to no boundary
    const report = await verifyQueue(DIR, { fs });
    assert.deepEqual(report.damage, []);
    assert.equal(report.ok, true);
    // Records 60 and 61 are framed before the break; the prefix's rest is not.
    assert.equal(report.records, TOTAL - 60 - 8);
    const opened = await openAndDrain(fs);
    assert.deepEqual(opened.errors, []);
    assert.deepEqual(opened.values, range(COMMITTED, TOTAL).map(rec));
  });

  it('the first record of the segment taken, then its length flipped (the fresh user\'s case): clean', async () => {
    const fs = await buildStore();
    flipByte(fs, segPath(2), at(0));
    assert.deepEqual((await verifyQueue(DIR, { fs })).damage, []);
    assert.deepEqual((await openAndDrain(fs)).errors, []);
  });

  it('a payload flipped inside the committed prefix: nothing reported, the intact records still counted', async () => {
    const fs = await buildStore();
    flipByte(fs, segPath(2), at(5) + 30); // record 65, committed
    const report = await verifyQueue(DIR, { fs });
    assert.deepEqual(report.damage, []);
    assert.equal(report.records, TOTAL - 60 - 1);
    assert.deepEqual((await openAndDrain(fs)).errors, []);
  });

  it('damage a drain already reported and stepped past is not reported again while its segment stays', async () => {
    const fs = await buildStore();
    flipByte(fs, segPath(4), at(2) + 30); // record 182, in the tail, not yet consumed
    const before = await verifyQueue(DIR, { fs });
    assert.deepEqual(
      before.damage.map((d) => [d.segment, d.position, d.reason, d.lostRecords]),
      [[4, at(2), 'checksum', 1]],
    );
    const first = await openAndDrain(fs);
    assert.equal(first.errors.length, 1);
    // The drain committed past the damage; the tail segment is not reclaimed, so the damaged bytes are still there.
    assert.ok(fs.readFile(segPath(4)));
    const after = await verifyQueue(DIR, { fs });
    assert.deepEqual(after.damage, []);
    assert.equal(after.ok, true);
    const second = await openAndDrain(fs);
    assert.deepEqual([second.errors, second.values], [[], []]);
  });

  it('damage after the commit cursor is still reported', async () => {
    const fs = await buildStore();
    patch(fs, segPath(2), at(12), [0x7e]); // record 72, not yet consumed
    const report = await verifyQueue(DIR, { fs });
    assert.deepEqual(report.damage, [{ segment: 2, position: at(12), reason: 'length', lostBytes: 48 * FRAME, lostRecords: 48 }]);
  });
});

describe('verifyQueue: a segment lost whole costs what the open estimates', () => {
  const cases: Array<[string, (fs: FaultyFileSystem) => void, string]> = [
    ['all-zero middle segment', (fs) => fs.writeFile(segPath(3), new Uint8Array(fs.readFile(segPath(3))!.length)), 'segment-zero'],
    ['middle segment cut to 30 bytes', (fs) => fs.writeFile(segPath(3), fs.readFile(segPath(3))!.slice(0, 30)), 'segment-short'],
    ['middle segment cut to 0 bytes', (fs) => fs.writeFile(segPath(3), new Uint8Array(0)), 'segment-zero'],
    ['middle segment removed', (fs) => fs.remove(segPath(3)), 'segment-missing'],
    [
      'middle segment with bad magic and no intact record',
      (fs) => {
        flipByte(fs, segPath(3), 0);
        flipByte(fs, segPath(3), at(0) + 30);
      },
      'segment-magic',
    ],
  ];
  for (const [name, damage, reason] of cases) {
    it(`${name}: ${reason}, 60 records and the nearest survivor's bytes, as the open books`, async () => {
      const fs = await buildStore();
      damage(fs);
      const report = await verifyQueue(DIR, { fs });
      assert.deepEqual(
        report.damage.map((d) => [d.segment, d.reason, d.lostRecords, d.lostBytes]),
        [[3, reason, PER_SEGMENT, PER_SEGMENT * FRAME]],
      );
      const opened = await openAndDrain(fs);
      assert.equal(opened.lostRecords, PER_SEGMENT);
      assert.equal(sum(report, 'lostRecords'), opened.lostRecords);
      assert.equal(sum(report, 'lostBytes'), opened.lostBytes);
    });
  }

  it('the head segment lost with nothing before it: estimated from the segment after it', async () => {
    const fs = await buildStore();
    fs.writeFile(segPath(2), new Uint8Array(HEADER_SIZE + 10).fill(7));
    const report = await verifyQueue(DIR, { fs });
    assert.deepEqual(report.damage, [{ segment: 2, position: 0, reason: 'segment-magic', lostRecords: PER_SEGMENT, lostBytes: PER_SEGMENT * FRAME }]);
    const opened = await openAndDrain(fs);
    assert.equal(sum(report, 'lostRecords'), opened.lostRecords);
    assert.equal(sum(report, 'lostBytes'), opened.lostBytes);
  });
});

describe('verifyQueue: a header whose checksum fails', () => {
  it('its commit cursor moved to a later record boundary: verify and the open both replay the segment from its first record, and lose nothing', async () => {
    const fs = await buildStore();
    // Record 100's boundary in segment 2, where 60–69 were committed; the checksum is left stale.
    const to = at(40);
    patch(fs, segPath(2), 8, [to & 0xff, to >> 8]);
    const report = await verifyQueue(DIR, { fs });
    assert.deepEqual(report.damage, [{ segment: 2, position: 0, reason: 'header-checksum', lostBytes: 0, lostRecords: 0 }]);
    assert.equal(report.committedRecords, 0, 'no commit position is believed');
    const opened = await openAndDrain(fs);
    assert.equal(opened.lostRecords, 0);
    assert.deepEqual(opened.errors.map((e) => e.reason), ['header-rebuilt']);
    // Everything verify counts as undelivered comes out: records 60–184, the committed 60–69 again.
    assert.equal(opened.values.length, report.records - report.committedRecords);
    assert.deepEqual(opened.values, range(60, TOTAL).map(rec));
  });
});
