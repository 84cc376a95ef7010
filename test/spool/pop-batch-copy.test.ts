/**
 * `Spool.popBatch` copies a batch's records into one buffer the batch owns:
 * each record's `data` must still be its own bytes, exactly as long as the
 * record, untouched by what the caller does to another record of the batch
 * and by what the spool reads, commits or retires afterwards.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FaultyFileSystem, appendAll, dec, openS, range, REC_FRAME } from './helpers.js';

/** Segments of four records each, so a batch of ten spans three. */
const SEG = 8 + 4 * REC_FRAME;

describe('popBatch copies', () => {
  it("gives each record its own bytes: writing over one changes no other record, and a later pop reads the stored bytes", async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs, { segmentBytes: SEG });
    try {
      await appendAll(s, 0, 12);
      const batch = await s.popBatch(10);
      assert.deepEqual(batch.map((p) => dec(p.data)), range(0, 10));
      for (const p of batch) assert.equal(p.data.length, 5, 'data is the record, not the batch buffer');
      // Scribble over every record after the first: the first and the stored records stay.
      for (const p of batch.slice(1)) p.data.fill(0x21);
      assert.equal(dec(batch[0]!.data), range(0, 1)[0]);
      const again = await s.popBatch(10);
      assert.deepEqual(again.map((p) => dec(p.data)), range(0, 10), 'the spool does not hand out the caller’s copy');
      assert.notEqual(again[1]!.data.buffer, batch[1]!.data.buffer, 'a new batch, a new buffer');
    } finally {
      await s.close();
    }
  });

  it('keeps a batch’s data after its records are committed and their segments retired', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs, { segmentBytes: SEG });
    try {
      await appendAll(s, 0, 12);
      const first = await s.popBatch(6);
      const rest = await s.popBatch(6, Infinity, first.at(-1));
      await s.commitBatch([...first, ...rest]);
      assert.equal(s.stats().committed, 12);
      assert.deepEqual([...first, ...rest].map((p) => dec(p.data)), range(0, 12));
    } finally {
      await s.close();
    }
  });
});
