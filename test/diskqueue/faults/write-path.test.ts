/**
 * The write path under faults: the order of an add's four steps, what each
 * step's failure publishes, what a reopen sees, and when the queue latches.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ClosedError, IOError, LockedError } from '../../../src/errors.js';
import { FaultyFileSystem, openQ, drainAll, addAll, val, range, causeCode, segPath, segNumbers } from './helpers.js';

/** The trace without opens and reads: the steps that write or sync. */
const steps = (fs: FaultyFileSystem, from = 0) =>
  fs.trace.slice(from).filter((s) => s.startsWith('write:') || s.startsWith('sync:'));

describe('the four steps of an add', () => {
  it('per-op: record write, data fsync, header write, header fsync, in that order', async () => {
    const fs = new FaultyFileSystem();
    const q = await openQ(fs);
    await q.add('warm'); // the first add also creates the segment and syncs the directory
    const from = fs.trace.length;
    await q.add('hello');
    assert.deepEqual(steps(fs, from), [
      'write:record data.00000001',
      'sync:data data.00000001',
      'write:header data.00000001',
      'sync:header data.00000001',
    ]);
    await q.close();
  });

  it('concurrent per-op adds share one data fsync and one header fsync (group commit)', async () => {
    const fs = new FaultyFileSystem();
    const q = await openQ(fs);
    await q.add('warm');
    const from = fs.trace.length;
    await Promise.all(range(0, 5).map((i) => q.add(val(i))));
    assert.deepEqual(steps(fs, from), [
      ...range(0, 5).map(() => 'write:record data.00000001'),
      'sync:data data.00000001',
      'write:header data.00000001',
      'sync:header data.00000001',
    ]);
    await q.close();
  });

  it('syncEvery: 100 writes record and header and never fsyncs per op', async () => {
    const fs = new FaultyFileSystem();
    const q = await openQ(fs, { syncEvery: 100 });
    const from = fs.trace.length;
    await addAll(q, range(0, 10).map((i) => val(i)));
    const s = steps(fs, from).filter((x) => !x.includes('allocate') && !x.startsWith('sync:dir'));
    assert.equal(s.filter((x) => x.startsWith('sync:')).length, 0);
    assert.deepEqual(s.slice(-2), ['write:record data.00000001', 'write:header data.00000001']);
    assert.equal(q.stats().unsyncedBytes, 10 * (1 + 5 + 8));
    await q.sync();
    assert.equal(q.stats().unsyncedBytes, 0);
    await q.close();
  });
});

describe('data fsync fails', () => {
  it('publishes nothing, latches add/commit/sync with the original errno, keeps reads, and close releases the lock', async () => {
    const fs = new FaultyFileSystem();
    let q = await openQ(fs);
    await addAll(q, ['a', 'b', 'c']);
    const r = q.reader();
    const reserved = await r.tryReserve();
    assert.equal(reserved?.value, 'a');

    fs.inject({ step: 'sync:data', error: 'EIO' });
    const failed = await q.add('lost').then(() => undefined, (e: unknown) => e);
    assert.ok(failed instanceof IOError);
    assert.equal(causeCode(failed), 'EIO');
    const original = (failed as IOError).cause;

    // Latched: every later add, commit and sync rejects with the original error as cause.
    for (const attempt of [() => q.add('x'), () => q.addBatch(['y']), () => r.commit(reserved!.offset), () => r.ack(reserved!.offset), () => q.sync()]) {
      const err = await attempt().then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof IOError, `latched call rejected with ${err}`);
      assert.equal((err as IOError).cause, original);
    }
    // The fault fired once: the latch, not the file system, refuses.
    assert.equal(fs.trace.filter((s) => s.startsWith('sync:data')).length, 1 + 3);

    // Reads and stats keep working; the failed add was never published.
    const st = q.stats();
    assert.equal(st.backlog, 3);
    assert.equal(st.added, 3);
    const rest = await drainAll(r);
    assert.deepEqual(rest.values, ['b', 'c']);

    // Close reports the latch but releases the lock.
    const closeErr = await q.close().then(() => undefined, (e: unknown) => e);
    assert.ok(closeErr instanceof IOError);
    assert.equal(causeCode(closeErr), 'EIO');

    q = await openQ(fs);
    // 'a' was never committed (the commit was refused), so it replays; 'lost' never appears.
    assert.deepEqual((await drainAll(q.reader())).values, ['a', 'b', 'c']);
    await q.add('after');
    assert.deepEqual((await drainAll(q.reader())).values, ['after']);
    await q.close();
  });
});

describe('header fsync fails', () => {
  it('latches; the rejected record is not readable now, and a reopen may see it only if its header reached the page cache', async () => {
    const fs = new FaultyFileSystem();
    let q = await openQ(fs);
    await q.add('a');
    fs.inject({ step: 'sync:header', error: 'EIO' });
    const err = await q.add('maybe').then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof IOError);
    assert.equal(causeCode(err), 'EIO');
    await assert.rejects(q.add('b'), IOError);
    assert.equal(q.stats().backlog, 1);
    const r = q.reader();
    assert.deepEqual((await drainAll(r)).values, ['a']);
    await assert.rejects(q.close(), IOError);

    // The header write reached the page cache before its fsync failed: a
    // process that merely restarts sees the record (an fsync failure is
    // ambiguous, never corrupt). 'a' replays: its take's commit met the latch.
    q = await openQ(fs);
    assert.deepEqual((await drainAll(q.reader())).values, ['a', 'maybe']);
    await q.close();
  });

});

describe('record or header write fails (before any fsync failed)', () => {
  for (const [step, error] of [
    ['write:record', 'EIO'],
    ['write:record', 'short'],
    ['write:header', 'EIO'],
    ['write:header', 'short'],
  ] as const) {
    for (const policy of [{}, { syncEvery: 100 }]) {
      it(`${step} ${error} (${policy.syncEvery ? 'syncEvery 100' : 'per-op'}): rolled back, not latched, a retry succeeds`, async () => {
        const fs = new FaultyFileSystem();
        let q = await openQ(fs, policy);
        await addAll(q, ['a', 'b']);
        fs.inject({ step, error });
        const err = await q.add('c').then(() => undefined, (e: unknown) => e);
        assert.ok(err instanceof IOError, `rejected with ${err}`);
        assert.equal(causeCode(err), error === 'short' ? 'ENOSPC' : 'EIO');
        assert.equal(q.stats().added, 2);
        assert.equal(q.stats().backlog, 2);
        await q.add('c'); // not latched
        await q.add('d');
        await q.sync();
        assert.deepEqual((await drainAll(q.reader())).values, ['a', 'b', 'c', 'd']);
        await q.close();
        q = await openQ(fs, policy);
        const st = q.stats();
        assert.equal(st.corruptions, 0);
        await q.close();
        fs.powerCut();
        q = await openQ(fs, policy);
        assert.equal(q.stats().corruptions, 0);
        assert.equal(q.stats().backlog, 0);
        await q.close();
      });
    }
  }

  it('addBatch stopped by a failed record write reports the durable leading items as placed', async () => {
    const fs = new FaultyFileSystem();
    let q = await openQ(fs);
    // A batch is written one pwrite per segment: 292 records of 14 bytes fill
    // the first segment, and the write of the run in the second one fails.
    fs.inject({ step: 'write:record', error: 'EIO', after: 1 });
    const err = await q.addBatch(range(0, 300).map((i) => val(i))).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof IOError);
    assert.equal(causeCode(err), 'EIO');
    assert.equal((err as IOError & { placed?: number }).placed, 292);
    assert.equal(q.stats().added, 292);
    await q.close();
    fs.powerCut();
    q = await openQ(fs);
    assert.deepEqual((await drainAll(q.reader())).values, range(0, 292).map((i) => val(i)));
    await q.close();
  });
});

describe('lifecycle (checklist 13)', () => {
  it('a second open is locked; close flushes without sync; every call after close is closed', async () => {
    const fs = new FaultyFileSystem();
    const q = await openQ(fs, { syncEvery: 1000 });
    await assert.rejects(openQ(fs), LockedError);
    await addAll(q, ['a', 'b']);
    assert.equal(q.stats().unsyncedBytes, 2 * (1 + 1 + 8));
    const r = q.reader();
    await q.close();
    await q.close(); // twice is a no-op
    for (const call of [() => q.add('x'), () => q.sync(), () => r.tryTake(), () => r.tryPeek(), () => q.rewind(), async () => q.stats(), async () => q.reader()]) {
      await assert.rejects(call(), ClosedError);
    }
    fs.powerCut();
    const q2 = await openQ(fs);
    assert.deepEqual((await drainAll(q2.reader())).values, ['a', 'b']);
    await q2.close();
    assert.ok(fs.readFile(segPath(1)));
  });
});

describe('group commit and addBatch under each failing step (checklist 3)', () => {
  // For each step: what three concurrent adds (one group) settle to, what an
  // addBatch of three reports as placed, whether the queue latches, and what
  // survives a power cut afterwards.
  const table = [
    { step: 'write:record', adds: ['rejected', 'fulfilled', 'fulfilled'], placed: 0, latched: false, survivors: 2 },
    { step: 'sync:data', adds: ['rejected', 'rejected', 'rejected'], placed: 0, latched: true, survivors: 0 },
    { step: 'write:header', adds: ['rejected', 'rejected', 'rejected'], placed: 0, latched: false, survivors: 0 },
    { step: 'sync:header', adds: ['rejected', 'rejected', 'rejected'], placed: 0, latched: true, survivors: 0 },
  ] as const;

  for (const row of table) {
    it(`${row.step} fails`, async () => {
      // Three concurrent adds share one group commit.
      let fs = new FaultyFileSystem();
      let q = await openQ(fs);
      await q.add('base');
      fs.inject({ step: row.step, error: 'EIO' });
      const settled = await Promise.allSettled([q.add('a'), q.add('b'), q.add('c')]);
      assert.deepEqual(settled.map((s) => s.status), row.adds);
      for (const s of settled) if (s.status === 'rejected') assert.ok(s.reason instanceof IOError && causeCode(s.reason) === 'EIO');
      const next = await q.add('d').then(() => 'fulfilled', () => 'rejected');
      assert.equal(next, row.latched ? 'rejected' : 'fulfilled', 'latched?');
      await q.close().catch(() => {});
      fs.powerCut();
      q = await openQ(fs);
      const expected = ['base', ...settled.flatMap((s, i) => (s.status === 'fulfilled' ? ['abc'[i]!] : [])), ...(row.latched ? [] : ['d'])];
      assert.deepEqual((await drainAll(q.reader())).values, expected);
      assert.equal(expected.length - 1 - (row.latched ? 0 : 1), row.survivors);
      await q.close();

      // addBatch: the count placed is how many leading items are durable.
      fs = new FaultyFileSystem();
      q = await openQ(fs);
      await q.add('base');
      fs.inject({ step: row.step, error: 'EIO' });
      const err = await q.addBatch(['a', 'b', 'c']).then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof IOError);
      assert.equal((err as IOError & { placed?: number }).placed, row.placed);
      await q.close().catch(() => {});
      fs.powerCut();
      q = await openQ(fs);
      assert.deepEqual((await drainAll(q.reader())).values, ['base']);
      await q.close();
    });
  }
});

describe('directory fsync fails when a segment is created', () => {
  it('latches like a data fsync: the adds in the new segment reject and a power cut takes the segment', async () => {
    const fs = new FaultyFileSystem();
    let q = await openQ(fs);
    await q.addBatch(range(0, 292).map((i) => val(i))); // fills segment 1 exactly
    fs.inject({ step: 'sync:dir', error: 'EIO' });
    const err = await q.add(val(292)).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof IOError);
    assert.equal(causeCode(err), 'EIO');
    await assert.rejects(q.add(val(293)), IOError);
    await assert.rejects(q.close(), IOError);
    fs.powerCut();
    q = await openQ(fs);
    assert.deepEqual(segNumbers(fs), [1]);
    const got = await drainAll(q.reader());
    assert.deepEqual(got, { values: range(0, 292).map((i) => val(i)), errors: [] });
    await q.close();
  });
});
