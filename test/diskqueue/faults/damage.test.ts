/**
 * Corruption degrades to reported loss: the damage table
 * in damage-table.ts, drained row by row. Every row asserts the survivors in
 * order, one CorruptError per loss event at its segment and position, the
 * loss counters as numbers, and that a second open reports nothing again.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { decodeHeader, HEADER_SIZE } from '../../../src/diskqueue/format.js';
import { openQ, drainAll, segPath, segNumbers, type DrainHow } from './helpers.js';
import { rows, buildStore, expectedValues, rec, TOTAL, COMMITTED } from './damage-table.js';

describe('damage table', () => {
  it('the undamaged store drains records 70–184', async () => {
    const fs = await buildStore();
    assert.deepEqual(segNumbers(fs), [2, 3, 4]);
    const q = await openQ(fs);
    const got = await drainAll(q.reader());
    assert.equal(got.values.length, TOTAL - COMMITTED);
    assert.deepEqual(got.values, expectedValues({ lost: [] } as never));
    assert.deepEqual(got.errors, []);
    await q.close();
  });

  for (const row of rows) {
    it(row.name, () => drainsRow(row, { kind: 'take' }));
  }
});

// The batch reads frame the records after the first from the block they were
// read in, on a path of their own: each stops at the damage and reports it
// exactly as the one-at-a-time drain does.
for (const how of [{ kind: 'takeBatch', n: 7 }, { kind: 'reserveBatch', n: 7 }] as const) {
  describe(`damage table, drained by ${how.kind}(${how.n})`, () => {
    for (const row of rows) it(row.name, () => drainsRow(row, how));
  });
}

/** Drains the store with `row`'s damage `how`, and checks survivors, events and counters. */
async function drainsRow(row: (typeof rows)[number], how: DrainHow): Promise<void> {
  const fs = await buildStore();
  row.damage(fs);
  const q = await openQ(fs); // never throws on damage
  const got = await drainAll(q.reader(), undefined, how);
  assert.deepEqual(got.values, expectedValues(row));
  assert.deepEqual(
    got.errors.map((e) => ({ segment: e.segment, position: e.position, reason: e.reason })),
    row.events,
  );
  const st = q.stats();
  assert.equal(st.corruptions, row.events.length, 'corruptions');
  assert.equal(st.lostRecords, row.lostRecords, 'lostRecords');
  assert.equal(st.lostSegments, row.lostSegments, 'lostSegments');
  assert.equal(st.foreignSegments, row.foreignSegments ?? 0, 'foreignSegments');
  if (row.lostBytes !== undefined) assert.equal(st.lostBytes, row.lostBytes, 'lostBytes');
  const perEvent = got.errors.reduce((n, e) => n + (e.lostRecords ?? 0), 0);
  assert.equal(perEvent, row.lostRecords, 'the events add up to the counter');
  assert.equal(st.backlog, 0);

  // The queue still works after the damage, and nothing is reported twice.
  await q.add('after');
  await q.close();
  const q2 = await openQ(fs);
  assert.equal(q2.stats().corruptions, 0, 'booked once: a reopen reports nothing again');
  const again = await drainAll(q2.reader());
  assert.deepEqual(again, { values: ['after'], errors: [] });
  await q2.close();
}

describe('torn header repair', () => {
  it('is persisted: a second reopen finds a valid header and the same records', async () => {
    const fs = await buildStore();
    const bytes = fs.readFile(segPath(3))!;
    bytes[60]! ^= 1;
    fs.writeFile(segPath(3), bytes);
    assert.equal(decodeHeader(bytes.subarray(0, HEADER_SIZE)).ok, false);
    const q = await openQ(fs);
    assert.equal(q.stats().corruptions, 1);
    await q.close();
    const repaired = decodeHeader(fs.readFile(segPath(3))!.subarray(0, HEADER_SIZE));
    assert.equal(repaired.ok, true);
    assert.equal(repaired.ok && repaired.header.writtenCount, 60);
    fs.powerCut(); // the repair was synced, not merely written
    const q2 = await openQ(fs);
    const got = await drainAll(q2.reader());
    // The CorruptError was owed by the first open; it is not raised again.
    assert.deepEqual(got.errors, []);
    assert.equal(got.values.length, TOTAL - COMMITTED);
    await q2.close();
  });

  it('in the tail segment: rebuilt and still appendable', async () => {
    const fs = await buildStore();
    const bytes = fs.readFile(segPath(4))!;
    bytes[20]! ^= 1;
    fs.writeFile(segPath(4), bytes);
    const q = await openQ(fs);
    await q.add(rec(TOTAL));
    const got = await drainAll(q.reader());
    assert.equal(got.errors.length, 1);
    assert.deepEqual(got.values.slice(-6), [180, 181, 182, 183, 184, 185].map(rec));
    await q.close();
  });
});
