/**
 * `Spool.appendBatchNoSync`: the records of a batch placed in order in one
 * call, exactly as `appendNoSync` of each in turn would place them, with the
 * first record that cannot be placed stopping the batch (its error names
 * how many were placed before it) and nothing after it placed.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ClosedError, FullError, InvalidArgumentError } from '../../src/spool/index.js';
import { FaultyFileSystem, dec, drain, enc, openS, range, rec, REC_FRAME, segNumbers } from './helpers.js';

/** Segments of four records each. */
const SEG = 8 + 4 * REC_FRAME;
const recs = (from: number, to: number) => range(from, to).map(enc);

describe('appendBatchNoSync', () => {
  it('places a batch in order across segments; a sync makes all of it survive a crash', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs, { segmentBytes: SEG });
    try {
      await s.appendBatchNoSync(recs(0, 10));
      assert.deepEqual(segNumbers(fs), [1, 2, 3], 'ten records of a four-record segment size make three segments');
      const popped = await s.popBatch(20);
      assert.deepEqual(popped.map((p) => dec(p.data)), range(0, 10), 'readable at once, in order');
      await s.sync();
    } finally {
      fs.processCrash(); // no close: only the sync counts
    }
    const s2 = await openS(fs, { segmentBytes: SEG });
    try {
      assert.deepEqual((await drain(s2)).values, range(0, 10));
    } finally {
      await s2.close();
    }
  });

  it('stops at the first record over maxBytes: FullError says how many went in, and only those are there', async () => {
    const fs = new FaultyFileSystem();
    // Room for three records' frames (segment header aside).
    const s = await openS(fs, { maxBytes: 8 + 3 * REC_FRAME });
    try {
      const err = await s.appendBatchNoSync(recs(0, 5)).then(
        () => assert.fail('a batch past maxBytes must reject'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof FullError, `got ${String(err)}`);
      assert.equal(err.code, 'ERR_FULL');
      assert.equal(err.placed, 3);
      assert.equal(s.stats().appended, 3);
      assert.deepEqual((await drain(s)).values, range(0, 3));
      // The refused records fit once the backlog is consumed.
      await s.appendBatchNoSync(recs(3, 5));
      assert.deepEqual((await drain(s)).values, range(3, 5));
    } finally {
      await s.close();
    }
  });

  it('refuses a record that is not bytes without placing it or anything after it', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    try {
      const batch = [enc(rec(0)), enc(rec(1)), 'r0002' as unknown as Uint8Array, enc(rec(3))];
      const err = await s.appendBatchNoSync(batch).then(
        () => assert.fail('a string record must be refused'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof InvalidArgumentError, `got ${String(err)}`);
      assert.equal(err.placed, 2);
      assert.deepEqual((await drain(s)).values, range(0, 2));
      await assert.rejects(s.appendBatchNoSync('r0000' as unknown as Uint8Array[]), InvalidArgumentError);
      await s.appendBatchNoSync([]);
      assert.equal(s.stats().appended, 2, 'an empty batch places nothing');
    } finally {
      await s.close();
    }
  });

  it('rejects with ClosedError after close, placing nothing', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    await s.close();
    const err = await s.appendBatchNoSync(recs(0, 2)).catch((e: unknown) => e);
    assert.ok(err instanceof ClosedError, `got ${String(err)}`);
    assert.equal((err as ClosedError).placed, undefined);
  });

  it('batches, single appends and pops run at once: each batch lies whole, in call order', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs, { segmentBytes: SEG });
    try {
      await s.append(enc(rec(0)));
      const [, first, , , second] = await Promise.all([
        s.appendBatchNoSync(recs(1, 6)),
        s.pop(),
        s.appendNoSync(enc(rec(6))),
        s.appendBatchNoSync(recs(7, 9)),
        s.popBatch(100),
        s.sync(),
      ]);
      assert.equal(dec(first!.data), rec(0), 'a pop sees the head');
      assert.deepEqual(second.map((p) => dec(p.data)), range(0, 9), 'every call placed its records when it was made, in order');
    } finally {
      fs.processCrash();
    }
    const s2 = await openS(fs, { segmentBytes: SEG });
    try {
      assert.deepEqual((await drain(s2)).values, range(0, 9), 'the sync covered the records placed before it');
    } finally {
      await s2.close();
    }
  });
});
