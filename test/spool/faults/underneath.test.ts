/**
 * Damage done to segment files while the spool runs (another process, a
 * failing disk): each must become one reported, counted loss and never a
 * wedged head.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CorruptError, FaultyFileSystem, drain, enc, openS, range, segPath } from '../helpers.js';

/** 20 records of 17 bytes, five to a 100-byte segment; the first is committed. */
async function fourSegments(fs: FaultyFileSystem) {
  const s = await openS(fs, { segmentBytes: 100 });
  for (const r of range(0, 20)) await s.append(enc(r));
  await (await s.pop())!.commit();
  return s;
}

describe('damage underneath a running spool', () => {
  it('a segment truncated mid-frame costs the rest of that segment, reported once, and the head moves on', async () => {
    const fs = new FaultyFileSystem();
    const s = await fourSegments(fs);
    // Segment 2 keeps two whole frames and five bytes of the third.
    fs.writeFile(segPath(2), fs.readFile(segPath(2))!.subarray(0, 8 + 17 * 2 + 5));
    const d = await drain(s, 100);
    assert.deepEqual(d.values, [...range(1, 7), ...range(10, 20)]);
    assert.equal(d.errors.length, 1);
    const e = d.errors[0]!;
    assert.ok(e instanceof CorruptError, String(e));
    assert.equal(e.reason, 'short');
    assert.equal(e.lostBytes, 17 * 3);
    assert.equal(s.stats().lostBytes, 17 * 3);
    assert.equal(s.stats().lostSegments, 1);
    await s.close();
  });
});
