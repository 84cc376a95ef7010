/**
 * `writeFrames`, the frames of a run of records written in one call (what
 * `Spool.appendRunNoSync` stages): byte for byte what `encodeFrame` gives
 * for each record in turn, whether the records lie close together (the span
 * copied once and each record moved down into place) or far apart, out of
 * order or overlapping (a copy per record); and nothing outside the frames'
 * room is touched.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { encodeFrame, writeFrames } from '../../src/spool/format.js';

/** A run: the records, and the gap in front of each (negative: overlapping the one before). */
const runs = fc.record({
  records: fc.array(fc.uint8Array({ maxLength: 40 }), { maxLength: 12 }),
  gaps: fc.array(fc.integer({ min: -3, max: 20 }), { minLength: 12, maxLength: 12 }),
  lead: fc.nat({ max: 30 }),
  at: fc.nat({ max: 30 }),
  cut: fc.tuple(fc.nat(), fc.nat()),
  seed: fc.integer(),
});

describe('writeFrames', () => {
  it('writes what encodeFrame gives for each record, and nothing else', () => {
    fc.assert(
      fc.property(runs, ({ records, gaps, lead, at, cut, seed }) => {
        // Lay the records out in one buffer with the gaps between them (a negative gap overlaps: the record's bytes win).
        const starts: number[] = [];
        let pos = lead;
        records.forEach((r, k) => {
          if (k > 0) pos = Math.max(0, pos + gaps[k]!);
          starts.push(pos);
          pos += r.length;
        });
        const bytes = new Uint8Array(pos + 5).map((_, i) => (i * 31 + seed) & 0xff);
        records.forEach((r, k) => bytes.set(r, starts[k]!));
        // What each record reads as in the buffer (an overlapped record's head was overwritten by the next).
        const read = records.map((r, k) => bytes.slice(starts[k]!, starts[k]! + r.length));
        const lengths = records.map((r) => r.length);
        const from = records.length === 0 ? 0 : cut[0] % (records.length + 1);
        const to = from + (records.length === 0 ? 0 : cut[1] % (records.length - from + 1));
        const want = Buffer.concat(read.slice(from, to).map((r) => encodeFrame(r)));
        const out = new Uint8Array(at + want.length + 7).fill(0xee);
        const before = bytes.slice();
        assert.equal(writeFrames(bytes, starts, lengths, from, to, out, at), want.length);
        assert.deepEqual(Buffer.from(out.subarray(at, at + want.length)), want);
        assert.ok(out.subarray(0, at).every((b) => b === 0xee), 'nothing before the frames');
        assert.ok(out.subarray(at + want.length).every((b) => b === 0xee), 'nothing after the frames');
        assert.deepEqual(bytes, before, 'the source is not changed');
      }),
      { numRuns: Number(process.env.FERRY_SPOOL_RUNS ?? 500) },
    );
  });

  it('lines with their newlines: the frames of a chunk of text', () => {
    const text = Buffer.from('alpha\nb\n\nlonger line here\nz\n');
    const starts: number[] = [];
    const lengths: number[] = [];
    for (let s = 0, nl = text.indexOf(10); nl !== -1; s = nl + 1, nl = text.indexOf(10, s)) {
      starts.push(s);
      lengths.push(nl - s);
    }
    const out = new Uint8Array(200);
    const n = writeFrames(text, starts, lengths, 0, starts.length, out, 3);
    const want = Buffer.concat(['alpha', 'b', '', 'longer line here', 'z'].map((l) => encodeFrame(Buffer.from(l))));
    assert.deepEqual(Buffer.from(out.subarray(3, 3 + n)), want);
  });
});
