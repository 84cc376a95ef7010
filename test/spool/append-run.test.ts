/**
 * `Spool.appendRunNoSync`: records that lie in one buffer (lines cut from a
 * read) placed as `appendBatchNoSync` of the same records would place them.
 * Checked against that reference byte for byte: for random runs, segment
 * sizes and caps, each call's outcome (its error and `placed`) and every
 * file the two spools leave are the same. Also: a bad run places nothing, a
 * closed spool refuses, and runs racing other calls each lie whole in call
 * order, surviving a crash once synced.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ClosedError, FerryError, FullError, InvalidArgumentError, type RecordRun } from '../../src/spool/index.js';
import { DIR, FaultyFileSystem, dec, drain, enc, openS, range, rec, REC_FRAME } from './helpers.js';

/** Segments of four records each. */
const SEG = 8 + 4 * REC_FRAME;

/** `records` laid out in one buffer, `gap` bytes of filler in front of each: a run. */
function runOf(records: Uint8Array[], gap = 1): RecordRun {
  const starts: number[] = [];
  const lengths: number[] = [];
  let at = 0;
  for (const r of records) {
    at += gap;
    starts.push(at);
    lengths.push(r.length);
    at += r.length;
  }
  const bytes = new Uint8Array(at).fill(0x0a);
  records.forEach((r, k) => bytes.set(r, starts[k]!));
  return { bytes, starts, lengths };
}

const outcome = (e: unknown) => (e === undefined ? 'ok' : e instanceof FerryError ? `${e.code} placed ${String(e.placed)}` : `not a FerryError: ${String(e)}`);

/** Every file of the spool directory and its bytes. */
function files(fs: FaultyFileSystem): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of fs.readdir(DIR).sort()) out[name] = Buffer.from(fs.readFile(`${DIR}/${name}`) ?? []).toString('hex');
  return out;
}

describe('appendRunNoSync', () => {
  it('places what appendBatchNoSync of the same records places: the same outcomes, the same files', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            sizes: fc.array(fc.nat({ max: 60 }), { maxLength: 30 }),
            gap: fc.integer({ min: 0, max: 20 }),
            cut: fc.tuple(fc.nat(), fc.nat()),
            pops: fc.integer({ min: 1, max: 6 }),
          }),
          { minLength: 1, maxLength: 8 },
        ),
        fc.integer({ min: 40, max: 600 }),
        fc.option(fc.integer({ min: 100, max: 2000 }), { nil: undefined }),
        async (calls, segmentBytes, maxBytes) => {
          const opts = { segmentBytes, ...(maxBytes === undefined ? {} : { maxBytes }) };
          const fsRun = new FaultyFileSystem();
          const fsRef = new FaultyFileSystem();
          const run = await openS(fsRun, opts);
          const ref = await openS(fsRef, opts);
          try {
            let n = 0;
            for (const c of calls) {
              const records = c.sizes.map((size) => enc(`${n++}:`.padEnd(size, 'x')));
              const from = records.length === 0 ? 0 : c.cut[0] % (records.length + 1);
              const to = from + (records.length === 0 ? 0 : c.cut[1] % (records.length - from + 1));
              const got = await run.appendRunNoSync(runOf(records, c.gap), from, to).then(() => undefined, (e: unknown) => e);
              const want = await ref.appendBatchNoSync(records.slice(from, to)).then(() => undefined, (e: unknown) => e);
              assert.equal(outcome(got), outcome(want));
              // Consume some, so later calls meet a spool with room again and segments retired.
              for (const s of [run, ref]) {
                const batch = await s.popBatch(c.pops);
                if (batch.length > 0) await s.commitBatch(batch);
              }
            }
            await Promise.all([run.sync(), ref.sync()]);
            assert.deepEqual(run.stats().appended, ref.stats().appended);
          } finally {
            await run.close();
            await ref.close();
          }
          assert.deepEqual(files(fsRun), files(fsRef));
        },
      ),
      { numRuns: Number(process.env.FERRY_SPOOL_RUNS ?? 150) },
    );
  });

  it('a run of lines in a read, across segments: readable at once, in order; a sync makes it survive a crash', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs, { segmentBytes: SEG });
    const text = enc(range(0, 10).join('\n') + '\n');
    const starts = range(0, 10).map((_, k) => k * 6);
    try {
      await s.appendRunNoSync({ bytes: text, starts, lengths: starts.map(() => 5) });
      assert.deepEqual((await s.popBatch(20)).map((p) => dec(p.data)), range(0, 10));
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

  it('stops at the first record over maxBytes: FullError counts the ones placed from `from`', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs, { maxBytes: 8 + 3 * REC_FRAME });
    try {
      const err = await s.appendRunNoSync(runOf(range(0, 6).map(enc)), 1).catch((e: unknown) => e);
      assert.ok(err instanceof FullError, `got ${String(err)}`);
      assert.equal(err.placed, 3);
      assert.deepEqual((await drain(s)).values, range(1, 4));
    } finally {
      await s.close();
    }
  });

  it('a bad run or range places nothing: InvalidArgumentError with placed 0', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    const good = runOf(range(0, 3).map(enc));
    const bad: Array<[unknown, number?, number?]> = [
      [null],
      [{ bytes: 'abc', starts: [0], lengths: [1] }],
      [{ bytes: good.bytes, starts: [0, 1], lengths: [1] }],
      [{ bytes: good.bytes, starts: [1, 7, good.bytes.length], lengths: [5, 5, 1] }],
      [{ bytes: good.bytes, starts: [1, -1], lengths: [5, 1] }],
      [{ bytes: good.bytes, starts: [1, 2.5], lengths: [5, 1] }],
      [good, 2, 1],
      [good, 0, 4],
      [good, -1],
    ];
    try {
      for (const [r, from, to] of bad) {
        const err = await s.appendRunNoSync(r as RecordRun, from, to).catch((e: unknown) => e);
        assert.ok(err instanceof InvalidArgumentError, `${JSON.stringify([r, from, to])}: got ${String(err)}`);
        assert.equal(err.placed, 0);
      }
      assert.equal(s.stats().appended, 0);
      await s.appendRunNoSync(good, 3);
      assert.equal(s.stats().appended, 0, 'an empty range places nothing');
    } finally {
      await s.close();
    }
    const err = await s.appendRunNoSync(good).catch((e: unknown) => e);
    assert.ok(err instanceof ClosedError, `got ${String(err)}`);
  });

  it('runs, batches, single appends and pops at once: each call lies whole, in call order', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs, { segmentBytes: SEG });
    try {
      await s.append(enc(rec(0)));
      const [, first, , , , all] = await Promise.all([
        s.appendRunNoSync(runOf(range(1, 6).map(enc))),
        s.pop(),
        s.appendNoSync(enc(rec(6))),
        s.appendBatchNoSync(range(7, 9).map(enc)),
        s.appendRunNoSync(runOf(range(9, 12).map(enc), 13)),
        s.popBatch(100),
        s.sync(),
      ]);
      assert.equal(dec(first!.data), rec(0));
      assert.deepEqual(all.map((p) => dec(p.data)), range(0, 12));
    } finally {
      fs.processCrash();
    }
    const s2 = await openS(fs, { segmentBytes: SEG });
    try {
      assert.deepEqual((await drain(s2)).values, range(0, 12), 'the sync covered every call made before it');
    } finally {
      await s2.close();
    }
  });
});
