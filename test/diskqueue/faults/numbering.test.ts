/**
 * Segment numbers are never reused: a new segment always
 * takes a number above any the directory has used, even when the newest
 * segments were dropped at open (damage, a foreign version, a creation a
 * power cut undid), and even when the process dies right after that open.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { encodeHeader, decodeHeader, HEADER_SIZE } from '../../../src/diskqueue/format.js';
import { openQ, drainAll, segPath, segNumbers, FaultyFileSystem } from './helpers.js';
import { buildStore, rec, TOTAL } from './damage-table.js';

/** Adds records until a new segment is rolled; returns the numbers present after. */
async function rollOnce(fs: FaultyFileSystem): Promise<number[]> {
  const q = await openQ(fs);
  const before = q.stats().segments;
  for (let i = 0; q.stats().segments === before; i++) await q.add(rec(1000 + i));
  await q.close();
  return segNumbers(fs);
}

describe('segment numbers are never reused', () => {
  it('the newest segment dropped for damage: the open creates 5 before removing 4, and the next roll is 6', async () => {
    const fs = await buildStore(); // segments 2, 3, 4
    fs.writeFile(segPath(4), fs.readFile(segPath(4))!.slice(0, 40)); // a header cut short: nothing to salvage
    const q = await openQ(fs);
    assert.deepEqual(segNumbers(fs), [2, 3, 5]);
    assert.equal(q.stats().lostSegments, 1);
    await q.add('after');
    const got = await drainAll(q.reader());
    assert.equal(got.errors.length, 1);
    assert.equal(got.errors[0]!.segment, 4);
    assert.equal(got.values.at(-1), 'after');
    await q.close();
    // The number is remembered by the directory, not only by that process
    // (the drain reclaimed 2 and 3).
    fs.powerCut();
    assert.deepEqual(segNumbers(fs), [5]);
    assert.deepEqual(await rollOnce(fs), [5, 6]);
  });

  it('a foreign newest segment: new segments are numbered above it', async () => {
    const fs = await buildStore();
    const file = fs.readFile(segPath(4))!;
    const res = decodeHeader(file.subarray(0, HEADER_SIZE));
    assert.ok(res.ok);
    file.set(encodeHeader({ ...res.header, version: 2 }), 0);
    fs.writeFile(segPath(4), file);
    const q = await openQ(fs);
    const st = q.stats();
    assert.equal(st.foreignSegments, 1);
    assert.equal(st.foreignBytes, file.length);
    assert.equal(st.corruptions, 0);
    await q.close();
    assert.deepEqual(segNumbers(fs), [2, 3, 5]);
  });

  it('a creation undid by a power cut (zero-length last file): its number is not handed out again by that open', async () => {
    const fs = await buildStore();
    fs.writeFile(segPath(5), new Uint8Array(0));
    const q = await openQ(fs);
    assert.deepEqual(segNumbers(fs), [2, 3, 4]);
    assert.equal(q.stats().corruptions, 0);
    for (let i = 0; q.stats().segments === 3; i++) await q.add(rec(TOTAL + i));
    await q.close();
    assert.deepEqual(segNumbers(fs), [2, 3, 4, 6]);
  });

  it('dropped segments in the middle do not lower the next number', async () => {
    const fs = await buildStore();
    fs.writeFile(segPath(3), new Uint8Array(fs.readFile(segPath(3))!.length)); // all zeros: dropped
    assert.deepEqual(await rollOnce(fs), [2, 4, 5]);
  });
});

describe('a run of missing numbers', () => {
  // The timeout is a hang bound: a step per missing number (99,999,994 of
  // them) takes minutes, or runs out of heap, where the open takes milliseconds.
  it('a stray segment numbered far above the rest is one loss event, found in bounded time and memory', { timeout: 120_000 }, async () => {
    const fs = await buildStore(); // segments 2, 3, 4
    fs.writeFile(segPath(99_999_999), fs.readFile(segPath(4))!);
    const q = await openQ(fs);
    const st = q.stats();
    assert.equal(st.corruptions, 1);
    assert.equal(st.lostSegments, 99_999_999 - 4 - 1);
    const got = await drainAll(q.reader());
    assert.equal(got.errors.length, 1, 'one CorruptError for the whole run');
    assert.equal(got.errors[0]!.segment, 5);
    assert.equal(got.errors[0]!.reason, 'segment-missing');
    assert.match(got.errors[0]!.message, /segments 5 to 99999998 missing between segments 4 and 99999999/);
    await q.close();
  });

  it('two missing segments in a row are one event counting both', async () => {
    const fs = await buildStore(); // segments 2, 3, 4
    fs.writeFile(segPath(5), fs.readFile(segPath(4))!);
    fs.unlink(segPath(3));
    fs.unlink(segPath(4));
    const q = await openQ(fs);
    const st = q.stats();
    assert.equal(st.corruptions, 1);
    assert.equal(st.lostSegments, 2);
    const got = await drainAll(q.reader());
    assert.equal(got.errors.length, 1);
    assert.match(got.errors[0]!.message, /segments 3 to 4 missing/);
    await q.close();
  });
});
