/**
 * `Spool.popRun` and `Spool.commitRuns`: the records of a `popBatch` as one
 * run (one copy, no object per record), and their commit in one step. A run
 * must hold exactly what `popBatch` would return, and committing runs must
 * act as committing their records one by one (each retires only when it is
 * the head by then), with one cursor write.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { GroupLostError, InvalidArgumentError, type PoppedRun, type Spool } from '../../src/spool/index.js';
import { FaultyFileSystem, appendAll, cursorWrites, dec, drain, enc, filled, openS, range, SEG4, seeded, segNumbers } from './helpers.js';

const SEG = SEG4;

const values = (run: PoppedRun | undefined) => (run ? Array.from({ length: run.count }, (_, k) => dec(run.record(k))) : []);


describe('popRun', () => {
  it('holds what popBatch returns, from the head and after an earlier run, across segments and under maxBytes', async () => {
    for (const [max, maxBytes] of [
      [1, Infinity],
      [3, Infinity],
      [10, Infinity],
      [10, 12],
    ] as const) {
      const a = await filled(new FaultyFileSystem(), 11);
      const b = await filled(new FaultyFileSystem(), 11);
      try {
        let after: PoppedRun | undefined;
        let afterRec;
        for (;;) {
          const run = await a.popRun(max, maxBytes, after);
          const batch = await b.popBatch(max, maxBytes, afterRec);
          assert.deepEqual(values(run), batch.map((p) => dec(p.data)), `max ${max}, maxBytes ${maxBytes}`);
          if (!run) break;
          // starts and lengths name each record in the run's one copy.
          for (let k = 0; k < run.count; k++) assert.equal(dec(run.bytes.subarray(run.starts[k], run.starts[k]! + run.lengths[k]!)), dec(batch[k]!.data));
          after = run;
          afterRec = batch.at(-1);
        }
        assert.equal(a.stats().popped, b.stats().popped);
      } finally {
        await a.close();
        await b.close();
      }
    }
  });

  it('a run is a copy: appends, commits and a reopen after it leave its bytes as they were', async () => {
    const fs = new FaultyFileSystem();
    const s = await filled(fs, 6);
    try {
      const run = (await s.popRun(6))!;
      await s.commitRuns([run]);
      await appendAll(s, 6, 12);
      assert.deepEqual(values(run), range(0, 6));
    } finally {
      await s.close();
    }
  });

  it('refuses a bad max or maxBytes, an `after` that is not a run, and a record index outside the run', async () => {
    const s = await filled(new FaultyFileSystem(), 2);
    try {
      await assert.rejects(s.popRun(0), InvalidArgumentError);
      await assert.rejects(s.popRun(1.5), InvalidArgumentError);
      await assert.rejects(s.popRun(1, Infinity, (await s.popBatch(1))[0] as unknown as PoppedRun), InvalidArgumentError);
      await assert.rejects(s.commitRuns('x' as unknown as PoppedRun[]), InvalidArgumentError);
      await assert.rejects(s.commitRuns([{}] as unknown as PoppedRun[]), InvalidArgumentError);
      for (const bad of [-1, NaN, 'x' as unknown as number]) {
        await assert.rejects(s.popRun(2, bad), InvalidArgumentError, `popRun maxBytes ${String(bad)}`);
        await assert.rejects(s.popBatch(2, bad), InvalidArgumentError, `popBatch maxBytes ${String(bad)}`);
      }
      assert.deepEqual(values(await s.popRun(2, 0)), [range(0, 1)[0]], 'maxBytes 0: the first record alone');
      const run = (await s.popRun(2))!;
      for (const k of [-1, 2, 0.5]) assert.throws(() => run.record(k), InvalidArgumentError, `record(${k})`);
    } finally {
      await s.close();
    }
  });
});

describe('commitRuns', () => {
  it('commits runs across segments with one cursor write; a reopen starts past all of them', async () => {
    const fs = new FaultyFileSystem();
    let s = await filled(fs, 12);
    try {
      const first = (await s.popRun(3))!;
      const second = (await s.popRun(7, Infinity, first))!;
      assert.deepEqual([...values(first), ...values(second)], range(0, 10));
      const before = cursorWrites(fs);
      await s.commitRuns([first, second]);
      assert.equal(cursorWrites(fs) - before, 1, 'one cursor write for two runs');
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

  it('acts as commitBatch on the same records: a run not at the head by then is skipped, the ones at it retire', async () => {
    for (let seed = 1; seed <= 40; seed++) {
      const next = seeded(seed);
      const a = await filled(new FaultyFileSystem(), 12);
      const b = await filled(new FaultyFileSystem(), 12);
      try {
        // The same cuts into runs and batches, then commits of a random choice of them in a random order.
        const runs: PoppedRun[] = [];
        const batches: Awaited<ReturnType<Spool['popBatch']>>[] = [];
        for (;;) {
          const n = 1 + next(4);
          const run = await a.popRun(n, Infinity, runs.at(-1));
          const batch = await b.popBatch(n, Infinity, batches.at(-1)?.at(-1));
          if (!run) break;
          runs.push(run);
          batches.push(batch);
        }
        for (let round = 0; round < 6; round++) {
          const pick = runs.map((_, i) => i).filter(() => next(3) === 0);
          if (next(2) === 0) pick.reverse();
          await a.commitRuns(pick.map((i) => runs[i]!));
          await b.commitBatch(pick.flatMap((i) => batches[i]!));
          assert.equal(a.stats().committed, b.stats().committed, `seed ${seed}, round ${round}: ${pick.join(',')}`);
        }
        assert.deepEqual((await drain(a)).values, (await drain(b)).values, `seed ${seed}`);
      } finally {
        await a.close();
        await b.close();
      }
    }
  });

  it('after a failed fdatasync cut records of a run, committing it retires only what is still the same record', async () => {
    const run = async (commit: (s: Spool) => Promise<void>) => {
      const fs = new FaultyFileSystem();
      const s = await openS(fs, { segmentBytes: 1 << 20 });
      await appendAll(s, 0, 3); // durable
      for (const r of ['x0', 'x1']) await s.appendNoSync(enc(r));
      await commit(s);
      return s;
    };
    // The run covers the three durable records and the two the rollback takes.
    const viaRun = await run(async (s) => {
      const r = (await s.popRun(5))!;
      assert.deepEqual(values(r), [...range(0, 3), 'x0', 'x1']);
      await failSync(s);
      for (const x of ['y0', 'y1']) await s.append(enc(x)); // new records where the cut ones were
      await s.commitRuns([r]);
    });
    const viaBatch = await run(async (s) => {
      const b = await s.popBatch(5);
      await failSync(s);
      for (const x of ['y0', 'y1']) await s.append(enc(x));
      await s.commitBatch(b);
    });
    try {
      assert.equal(viaRun.stats().committed, 3, 'the three durable records retire; the cut ones are gone and their replacements stay');
      assert.equal(viaBatch.stats().committed, 3);
      assert.deepEqual((await drain(viaRun)).values, ['y0', 'y1']);
      assert.deepEqual((await drain(viaBatch)).values, ['y0', 'y1']);
    } finally {
      await viaRun.close();
      await viaBatch.close();
    }
  });

  it('an empty list writes nothing; after close it is a no-op', async () => {
    const fs = new FaultyFileSystem();
    const s = await filled(fs, 2);
    let r: PoppedRun | undefined;
    try {
      const before = cursorWrites(fs);
      await s.commitRuns([]);
      assert.equal(cursorWrites(fs), before);
      r = await s.popRun(2);
    } finally {
      await s.close();
    }
    await s.commitRuns([r!]);
    const s2 = await openS(fs, { segmentBytes: SEG });
    try {
      assert.deepEqual((await drain(s2)).values, range(0, 2), 'nothing was committed after close');
    } finally {
      await s2.close();
    }
  });
});

describe('popRun and commitRuns at once with other calls', () => {
  it('requeue × popRun: the run starts after the moved record and ends with its copy', async () => {
    const s = await openS(new FaultyFileSystem());
    try {
      for (const r of ['a', 'b', 'c']) await s.append(enc(r));
      const p = (await s.pop())!;
      const [rotated, run] = await Promise.all([s.requeue(p), s.popRun(10)]);
      assert.equal(rotated, true);
      assert.deepEqual(values(run), ['b', 'c', 'a']);
    } finally {
      await s.close();
    }
  });

  it('requeue × commitRuns of the run after the head: the commit lands after the move, at the head', async () => {
    const s = await openS(new FaultyFileSystem());
    try {
      for (const r of ['a', 'b', 'c']) await s.append(enc(r));
      const pa = (await s.pop())!;
      const rest = (await s.popRun(1, Infinity, undefined))!; // 'a' again: from the head
      const after = (await s.popRun(1, Infinity, rest))!; // 'b'
      assert.deepEqual([values(rest), values(after)], [['a'], ['b']]);
      const [rotated] = await Promise.all([s.requeue(pa), s.commitRuns([after])]);
      assert.equal(rotated, true);
      assert.deepEqual((await drain(s)).values, ['c', 'a'], "b was the head after the move, so its commit retired it");
    } finally {
      await s.close();
    }
  });

  it('commitRuns × commitRuns × popRun: overlapping commits retire the union once, and the pop sees the moved head', async () => {
    const s = await filled(new FaultyFileSystem(), 12);
    try {
      const r1 = (await s.popRun(4))!;
      const r2 = (await s.popRun(4, Infinity, r1))!;
      const r3 = (await s.popRun(4, Infinity, r2))!;
      const [, , next] = await Promise.all([s.commitRuns([r1, r2]), s.commitRuns([r1, r2, r3]), s.popRun(2)]);
      assert.equal(s.stats().committed, 12);
      assert.deepEqual(values(next), [], 'the pop made after both commits finds nothing left');
    } finally {
      await s.close();
    }
  });

  it('appendNoSync × popRun after the last run: a pop made after an append sees it', async () => {
    const s = await filled(new FaultyFileSystem(), 2);
    try {
      const r = (await s.popRun(5))!;
      const [, next] = await Promise.all([s.appendNoSync(enc('late')), s.popRun(5, Infinity, r)]);
      assert.deepEqual(values(next), ['late']);
    } finally {
      await s.close();
    }
  });
});

/** Makes the next segment fdatasync fail, and syncs: the appendNoSync group is rolled back. */
async function failSync(s: Spool): Promise<void> {
  const fs = (s as unknown as { fs: FaultyFileSystem }).fs;
  fs.inject({ step: 'sync:data', error: 'EIO' });
  await assert.rejects(s.sync(), GroupLostError);
}
