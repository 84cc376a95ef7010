/**
 * `Spool.commitBatch`: the records of a batch committed with one cursor
 * write. It must act as the records' own commits made in turn (each retires
 * its record only when it is the head by then), write the cursor once, and
 * leave a crash at any point with every uncommitted record still there.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { InvalidArgumentError, IOError, type Popped } from '../../src/spool/index.js';
import { FaultyFileSystem, cursorWrites, dec, drain, filled, openS, range, SEG4, seeded, segNumbers } from './helpers.js';

const SEG = SEG4;



describe('commitBatch', () => {
  it('commits a popBatch across segments with one cursor write; a reopen starts past all of it', async () => {
    const fs = new FaultyFileSystem();
    let s = await filled(fs, 12);
    try {
      const batch = await s.popBatch(10);
      assert.deepEqual(batch.map((p) => dec(p.data)), range(0, 10));
      const before = cursorWrites(fs);
      await s.commitBatch(batch);
      assert.equal(cursorWrites(fs) - before, 1, 'one cursor write for ten records');
      assert.equal(s.stats().committed, 10);
      assert.deepEqual(segNumbers(fs), [3], 'the two consumed segments are retired');
    } finally {
      await s.close();
    }
    s = await openS(fs, { segmentBytes: SEG });
    try {
      assert.deepEqual((await drain(s)).values, range(10, 12), 'the cursor is past all ten');
    } finally {
      await s.close();
    }
  });

  it('a killed process after the batch commit resolved reopens past every record of it', async () => {
    const fs = new FaultyFileSystem();
    const s = await filled(fs, 7);
    try {
      await s.commitBatch(await s.popBatch(6));
    } finally {
      fs.processCrash(); // no close: only what the commit itself wrote counts
    }
    const s2 = await openS(fs, { segmentBytes: SEG });
    try {
      assert.deepEqual((await drain(s2)).values, range(6, 7));
    } finally {
      await s2.close();
    }
  });

  it('a cursor write that fails in a batch commit loses nothing: the head moved in memory, a restart redelivers the batch', async () => {
    const fs = new FaultyFileSystem();
    const s = await filled(fs, 6);
    const batch = await s.popBatch(6);
    try {
      await batch[0]!.commit(); // persisted
      fs.inject({ step: 'write:cursor', error: 'EIO', times: Infinity });
      await s.commitBatch(batch.slice(1, 3));
      assert.ok(s.cursorError instanceof IOError && s.cursorError.errno === 'EIO');
      assert.equal(s.stats().cursorErrors, 1, 'one cursor write was tried for the batch');
      assert.equal(s.stats().committed, 3);
      assert.equal(dec((await s.pop())!.data), range(3, 4)[0], 'in memory the head is past the batch');
    } finally {
      fs.processCrash();
    }
    fs.clearFaults();
    const s2 = await openS(fs, { segmentBytes: SEG });
    try {
      assert.deepEqual((await drain(s2)).values, range(1, 6), 'the batch whose cursor was not written comes back, and everything after it');
    } finally {
      await s2.close();
    }
  });

  it('acts as the records own commits in turn: records not at the head by then are skipped, the rest retire', async () => {
    for (let seed = 1; seed <= 40; seed++) {
      const next = seeded(seed);
      const fsA = new FaultyFileSystem();
      const fsB = new FaultyFileSystem();
      const a = await filled(fsA, 10);
      const b = await filled(fsB, 10);
      try {
        const pa = await a.popBatch(10);
        const pb = await b.popBatch(10);
        // Some committed one by one first, then a random selection (in order, with gaps) as a batch.
        const early = next(4);
        for (let i = 0; i < early; i++) {
          await pa[i]!.commit();
          await pb[i]!.commit();
        }
        const pick = pa.map((_, i) => i).filter(() => next(4) !== 0);
        for (const i of pick) await pa[i]!.commit();
        await b.commitBatch(pick.map((i) => pb[i]!));
        assert.equal(b.stats().committed, a.stats().committed, `seed ${seed}: picked ${pick.join(',')} after ${early}`);
        assert.deepEqual((await drain(b)).values, (await drain(a)).values, `seed ${seed}`);
      } finally {
        await a.close();
        await b.close();
      }
    }
  });

  it('concurrent batch commits and pops each see one step: overlapping batches retire the union once', async () => {
    const fs = new FaultyFileSystem();
    const s = await filled(fs, 12);
    try {
      const batch = await s.popBatch(12);
      const [, , , popped] = await Promise.all([
        s.commitBatch(batch.slice(0, 6)),
        s.commitBatch(batch.slice(0, 9)),
        s.commitBatch(batch.slice(3, 9)),
        s.pop(),
      ]);
      assert.equal(s.stats().committed, 9);
      assert.equal(dec(popped!.data), range(9, 10)[0], 'the pop made after the commits sees the head they moved');
      assert.deepEqual((await drain(s)).values, range(9, 12));
    } finally {
      await s.close();
    }
  });

  it('an empty batch writes nothing; a non-array is refused; after close it is a no-op', async () => {
    const fs = new FaultyFileSystem();
    const s = await filled(fs, 2);
    let batch: Popped[] = [];
    try {
      const before = cursorWrites(fs);
      await s.commitBatch([]);
      assert.equal(cursorWrites(fs), before);
      await assert.rejects(s.commitBatch('x' as unknown as Popped[]), InvalidArgumentError);
      await assert.rejects(s.commitBatch([{}] as unknown as Popped[]), InvalidArgumentError);
      batch = await s.popBatch(2);
    } finally {
      await s.close();
    }
    await s.commitBatch(batch);
    const s2 = await openS(fs, { segmentBytes: SEG });
    try {
      assert.deepEqual((await drain(s2)).values, range(0, 2), 'nothing was committed after close');
    } finally {
      await s2.close();
    }
  });

  it('popBatch after a record continues past it without reading the window again; from the head once it is passed', async () => {
    const fs = new FaultyFileSystem();
    const s = await filled(fs, 10);
    try {
      const a = await s.popBatch(3);
      const b = await s.popBatch(3, Infinity, a.at(-1));
      assert.deepEqual(b.map((p) => dec(p.data)), range(3, 6), 'after r0002, across into segment 2');
      const c = await s.popBatch(10, Infinity, b.at(-1));
      assert.deepEqual(c.map((p) => dec(p.data)), range(6, 10));
      assert.deepEqual(await s.popBatch(5, Infinity, c.at(-1)), [], 'nothing after the last record');
      // Committing a and b in one batch, in a different call order from the pops.
      await Promise.all([s.commitBatch(b), s.commitBatch(a)]);
      assert.equal(s.stats().committed, 3, 'b before a: only a retires, b is not at the head when its batch runs');
      await s.commitBatch([...a, ...b]);
      assert.equal(s.stats().committed, 6);
      // a's last record is passed: the batch starts at the head.
      assert.deepEqual((await s.popBatch(2, Infinity, a.at(-1))).map((p) => dec(p.data)), range(6, 8));
      await s.append(new TextEncoder().encode('r0010'));
      assert.deepEqual((await s.popBatch(5, Infinity, c.at(-1))).map((p) => dec(p.data)), ['r0010'], 'an append after the batch is found');
      await assert.rejects(s.popBatch(1, Infinity, {} as Popped), InvalidArgumentError);
    } finally {
      await s.close();
    }
  });
});
