import { test } from 'node:test';
import assert from 'node:assert/strict';
import { estimateLostSegment, type SegmentShape } from '../../src/diskqueue/loss-estimate.js';
import { HEADER_SIZE } from '../../src/diskqueue/format.js';

const shape = (writtenCount: number, bytes: number, oversized = false): SegmentShape => ({ oversized, writtenCount, writeCursor: HEADER_SIZE + bytes });

test('a lost segment is estimated from the nearest survivor before it, skipping oversized and empty ones', () => {
  const before = [shape(0, 0), shape(1, 9000, true), shape(7, 700), shape(3, 300)]; // nearest first
  assert.deepEqual(estimateLostSegment(before, shape(9, 900), 4096), { records: 7, bytes: 700 });
});

test('with no survivor before it, from the segment after it; failing both, one record in a segment', () => {
  assert.deepEqual(estimateLostSegment([], shape(9, 900), 4096), { records: 9, bytes: 900 });
  assert.deepEqual(estimateLostSegment([shape(2, 9000, true)], shape(1, 8000, true), 4096), { records: 1, bytes: 4096 });
  assert.deepEqual(estimateLostSegment([], undefined, 4096), { records: 1, bytes: 4096 });
});

test('survivors are read only until one fits', () => {
  let read = 0;
  function* lazy(): Generator<SegmentShape> {
    for (const s of [shape(0, 0), shape(5, 50), shape(6, 60)]) {
      read++;
      yield s;
    }
  }
  assert.deepEqual(estimateLostSegment(lazy(), undefined, 4096), { records: 5, bytes: 50 });
  assert.equal(read, 2);
});
