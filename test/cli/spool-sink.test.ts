/**
 * `ferry push` into a spool directory, at the seam it writes through
 * (`spoolSink`): when a batch stops part-way, the error's `placed` counts
 * the batch's records that are durable, whatever stopped it, and `unsure`
 * bounds the ones that may be when their sync failed too. A full disk once
 * reported 0 for a failing batch whose records were all stored.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { FaultyFileSystem } from '../../src/storage/faulty.js';
import { FerryError, FullError, GroupLostError, IOError } from '../../src/errors.js';
import { spoolSink, type PartialBatch } from '../../src/cli/spool-dir.js';
import { drain, enc, openS, range } from '../spool/helpers.js';

const records = (from: number, to: number) => range(from, to).map((v) => enc(v));

/** What a reopened spool on `fs` holds, in order. */
async function stored(fs: FaultyFileSystem): Promise<string[]> {
  fs.clearFaults();
  fs.capacity = Infinity;
  const s = await openS(fs);
  try {
    return (await drain(s)).values;
  } finally {
    await s.close();
  }
}

/** What `addBatch` rejected with. */
async function failure(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => assert.fail('the batch was expected to fail'),
    (e: unknown) => e,
  );
}

describe('spoolSink: what a failed batch says it stored', () => {
  it('a full disk where the next segment cannot be made: placed counts every record before it, and exactly those are stored, even after a power cut', async () => {
    const fs = new FaultyFileSystem();
    const sink = spoolSink(await openS(fs, { segmentBytes: 512 }));
    // Room for every write but the third new segment's header.
    fs.inject({ step: 'write:header', error: 'ENOSPC', after: 2 });
    const err = await failure(sink.addBatch(records(0, 1000)));
    assert.ok(err instanceof IOError, `an IOError, got ${String(err)}`);
    assert.match(err.message, /cannot create segment .*ENOSPC/);
    const placed = err.placed!;
    assert.ok(placed > 10 && placed < 1000, `some records fit (${placed})`);
    assert.equal((err as PartialBatch).unsure, undefined, 'their sync succeeded: nothing is uncertain');
    await sink.close();
    fs.powerCut();
    assert.deepEqual(await stored(fs), range(0, placed), 'the first `placed` records, durable');
  });

  it('a full disk that also lost unsynced writes: none counts as stored, unsure bounds what may be, and what is stored lies within it', async () => {
    const fs = new FaultyFileSystem();
    fs.capacity = 2048;
    const sink = spoolSink(await openS(fs, { segmentBytes: 512 }));
    const err = await failure(sink.addBatch(records(0, 1000)));
    assert.ok(err instanceof FerryError, `a FerryError, got ${String(err)}`);
    assert.match(err.message + String((err.cause as Error | undefined)?.message), /ENOSPC/);
    assert.equal(err.placed, 0);
    const unsure = (err as PartialBatch).unsure!;
    assert.ok(unsure > 10 && unsure < 1000, `records were placed before the failure (${unsure})`);
    await sink.close().catch(() => {});
    fs.powerCut();
    const kept = await stored(fs);
    assert.ok(kept.length <= unsure, `at most unsure (${unsure}) are stored, found ${kept.length}`);
    assert.deepEqual(kept, range(0, kept.length), 'a prefix of the batch, in order');
  });

  it('a staged write that fails mid-batch: the group is lost, none of the batch counts, and what is stored is a gapless prefix within unsure', async () => {
    const fs = new FaultyFileSystem();
    const sink = spoolSink(await openS(fs));
    assert.equal(await sink.addBatch(records(0, 5)), 5);
    // The batch's first burst is written when the write-behind buffer fills or the turn ends: that write fails.
    fs.inject({ step: 'write:record', error: 'ENOSPC' });
    const big = Array.from({ length: 5000 }, (_, i) => enc(`r${String(5 + i).padStart(4, '0')}${'x'.repeat(40)}`));
    const err = await failure(sink.addBatch(big));
    assert.ok(err instanceof GroupLostError, `GroupLostError, got ${String(err)}`);
    assert.equal(err.placed, 0);
    const unsure = (err as PartialBatch).unsure ?? 0;
    await sink.close();
    fs.powerCut();
    const kept = await stored(fs);
    assert.deepEqual(kept.slice(0, 5), range(0, 5), 'the earlier batch');
    assert.ok(kept.length - 5 <= unsure, `no more than unsure (${unsure}) of the batch: ${kept.length - 5}`);
    kept.slice(5).forEach((v, i) => assert.equal(v.slice(0, 5), `r${String(5 + i).padStart(4, '0')}`, 'a gapless prefix of the batch'));
  });

  it('the cap: placed counts the records before it, as before', async () => {
    const fs = new FaultyFileSystem();
    const sink = spoolSink(await openS(fs, { maxBytes: 17 * 10 }));
    const err = await failure(sink.addBatch(records(0, 50)));
    assert.ok(err instanceof FullError);
    assert.equal(err.placed, 10);
    await sink.close();
    fs.powerCut();
    assert.deepEqual(await stored(fs), range(0, 10));
  });

  it('a failed sync after the cap: none of the batch counts as stored, and the cap is still the error reported', async () => {
    const fs = new FaultyFileSystem();
    const sink = spoolSink(await openS(fs, { maxBytes: 17 * 10 }));
    assert.equal(await sink.addBatch(records(0, 3)), 3);
    fs.inject({ step: 'sync:data', error: 'EIO' });
    const err = await failure(sink.addBatch(records(3, 50)));
    assert.ok(err instanceof FullError, `the cap is reported, got ${String(err)}`);
    assert.equal(err.placed, 0, 'the sync that failed rolled the batch back');
    assert.equal((err as PartialBatch).unsure, 7);
    await sink.close().catch(() => {});
    fs.powerCut();
    const kept = await stored(fs);
    assert.deepEqual(kept.slice(0, 3), range(0, 3), 'the earlier, synced batch');
    assert.ok(kept.length <= 10, `nothing past the uncertain records (${kept.length})`);
  });
  it('batches added at once: each resolves with its count, and after a power cut every record is stored once, each batch in its order', async () => {
    const fs = new FaultyFileSystem();
    const sink = spoolSink(await openS(fs, { segmentBytes: 512 }));
    const counts = await Promise.all([sink.addBatch(records(0, 300)), sink.addBatch(records(300, 500)), sink.addBatch(records(500, 501))]);
    assert.deepEqual(counts, [300, 200, 1]);
    await sink.close();
    fs.powerCut();
    const kept = await stored(fs);
    assert.equal(kept.length, 501);
    assert.deepEqual([...kept].sort(), range(0, 501), 'every record once');
    assert.deepEqual(kept.filter((r) => r < range(300, 301)[0]!), range(0, 300), "the first batch's records in order");
    assert.deepEqual(kept.filter((r) => r >= range(300, 301)[0]! && r < range(500, 501)[0]!), range(300, 500));
  });
});
