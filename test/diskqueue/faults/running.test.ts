/**
 * Faults under a running queue and at open: a segment deleted underneath,
 * an I/O error on read, a permission error at open, a segment-size mismatch,
 * a full file system, oversized segments, and peeking at damage.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CorruptError, IOError, SegmentSizeMismatchError } from '../../../src/errors.js';
import { FaultyFileSystem, openQ, drainAll, segPath, segNumbers, range, val, causeCode, flipByte, DIR } from './helpers.js';
import { rec, at, TOTAL, COMMITTED, PER_SEGMENT, buildStore } from './damage-table.js';

/** Every file in the queue directory and its bytes. */
function snapshot(fs: FaultyFileSystem): Map<string, string> {
  return new Map(fs.readdir(DIR).sort().map((n) => [n, Buffer.from(fs.readFile(`${DIR}/${n}`)!).toString('hex')]));
}

describe('a segment deleted underneath a running queue', () => {
  for (const opts of [{}, { maxOpenFiles: 1 }]) {
    it(`is one loss event and the reader moves on${opts.maxOpenFiles ? ' (maxOpenFiles 1: found when its handle reopens)' : ' (found on segment switch)'}`, async () => {
      const fs = new FaultyFileSystem();
      const q = await openQ(fs, opts);
      await q.addBatch(range(0, TOTAL).map(rec));
      assert.deepEqual(segNumbers(fs), [1, 2, 3, 4]);
      const r = q.reader();
      for (let i = 0; i < 5; i++) assert.equal((await r.tryTake())?.value, rec(i));
      fs.remove(segPath(2));
      const got = await drainAll(r);
      assert.deepEqual(got.values, [...range(5, 60), ...range(120, TOTAL)].map(rec));
      assert.deepEqual(
        got.errors.map((e) => [e.segment, e.position, e.reason, e.lostRecords]),
        [[2, 64, 'missing', PER_SEGMENT]],
      );
      const st = q.stats();
      assert.equal(st.corruptions, 1);
      assert.equal(st.lostRecords, PER_SEGMENT);
      assert.equal(st.backlog, 0);
      await q.add('after');
      await q.close();
      const q2 = await openQ(fs, opts);
      assert.equal(q2.stats().corruptions, 0);
      assert.deepEqual(await drainAll(q2.reader()), { values: ['after'], errors: [] });
      await q2.close();
    });
  }
});

describe('a segment cut short underneath a running queue', () => {
  it('delivers the records before the cut and books the rest of the segment once', async () => {
    const fs = new FaultyFileSystem();
    const q = await openQ(fs);
    await q.addBatch(range(0, TOTAL).map(rec));
    const r = q.reader();
    for (let i = 0; i < 5; i++) assert.equal((await r.tryTake())?.value, rec(i));
    const file = fs.readFile(segPath(2))!;
    fs.writeFile(segPath(2), file.slice(0, at(30) + 20)); // same file, now cut inside record 90
    const got = await drainAll(r);
    assert.deepEqual(got.values, [...range(5, 90), ...range(120, TOTAL)].map(rec));
    assert.deepEqual(
      got.errors.map((e) => [e.segment, e.position, e.reason, e.lostRecords]),
      [[2, at(30), 'length', 30]],
    );
    assert.deepEqual([q.stats().corruptions, q.stats().lostRecords, q.stats().backlog], [1, 30, 0]);
    await q.close();
  });
});

describe('an I/O error on read is not damage', () => {
  it('nothing is dropped or counted, the cursor stays, and the next read retries', async () => {
    const fs = await buildStore();
    const q = await openQ(fs);
    const r = q.reader();
    fs.inject({ step: 'read', error: 'EIO', path: 'data.00000002' });
    const err = await r.tryTake().then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof IOError, `${err}`);
    assert.equal(causeCode(err), 'EIO');
    const st = q.stats();
    assert.deepEqual([st.delivered, st.corruptions, st.lostRecords, st.backlog], [0, 0, 0, TOTAL - COMMITTED]);
    fs.inject({ step: 'read', error: 'EIO', path: 'data.00000002' });
    await assert.rejects(r.tryPeek(), IOError);
    const got = await drainAll(r);
    assert.deepEqual(got.errors, []);
    assert.equal(got.values.length, TOTAL - COMMITTED);
    assert.equal(got.values[0], rec(COMMITTED));
    await q.close();
  });
});

describe('errors while loading a segment', () => {
  for (const fault of [
    { step: 'open', error: 'EACCES' },
    { step: 'read', error: 'EIO' },
  ] as const) {
    it(`${fault.step} ${fault.error} fails the open and deletes nothing, not even damaged segments`, async () => {
      const fs = await buildStore();
      fs.writeFile(segPath(2), new Uint8Array(fs.readFile(segPath(2))!.length)); // all zeros, nothing to salvage: would be dropped
      fs.writeFile(segPath(5), new Uint8Array(0)); // an empty tail: would be removed
      const before = snapshot(fs);
      fs.inject({ ...fault, path: 'data.00000004' });
      const err = await openQ(fs).then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof IOError, `${err}`);
      assert.equal(causeCode(err), fault.error);
      assert.deepEqual(snapshot(fs), before);
      // The lock was released: once the fault clears, the open succeeds and repairs.
      const q = await openQ(fs);
      assert.equal(q.stats().lostSegments, 1);
      assert.deepEqual(segNumbers(fs), [3, 4]);
      await q.close();
    });
  }

  it('a read error inside the walk of a damaged segment also fails the open before any change', async () => {
    const fs = await buildStore();
    flipByte(fs, segPath(2), 0); // bad magic: salvaged by a walk of its records
    flipByte(fs, segPath(3), 60); // torn header: rebuilt by a walk
    const before = snapshot(fs);
    fs.inject({ step: 'read', error: 'EIO', path: 'data.00000003', after: 1 }); // the header read passes, the walk fails
    await assert.rejects(openQ(fs), IOError);
    assert.deepEqual(snapshot(fs), before);
  });
});

describe('geometry', () => {
  it('reopening with another segmentSize is refused and touches nothing', async () => {
    const fs = await buildStore();
    const before = snapshot(fs);
    const err = await openQ(fs, { segmentSize: 8192 }).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof SegmentSizeMismatchError);
    assert.equal((err as SegmentSizeMismatchError).stored, 4096);
    assert.equal((err as SegmentSizeMismatchError).requested, 8192);
    assert.deepEqual(snapshot(fs), before);
    const q = await openQ(fs); // the lock was released
    assert.equal(q.stats().backlog, TOTAL - COMMITTED);
    await q.close();
  });

  it('an oversized record gets a segment of its own that survives reopen and a power cut', async () => {
    const fs = new FaultyFileSystem();
    let q = await openQ(fs);
    const big = 'B'.repeat(10_000);
    await q.add('small-1');
    await q.add(big);
    await q.add('small-2');
    await q.close();
    fs.powerCut();
    q = await openQ(fs);
    assert.equal(q.stats().corruptions, 0);
    assert.equal(q.stats().segments, 3);
    const got = await drainAll(q.reader());
    assert.deepEqual(got, { values: ['small-1', big, 'small-2'], errors: [] });
    await q.close();
  });
});

describe('a full file system', () => {
  it('is reported when a segment is created, never inside one, and adds resume once space is freed', async () => {
    const fs = new FaultyFileSystem();
    const q = await openQ(fs);
    await q.add(val(0)); // creates segment 1, preallocated whole
    fs.capacity = fs.usedBytes(); // not one byte more
    // The preallocated segment still takes its 292 records of 14 bytes.
    for (let i = 1; i < 292; i++) await q.add(val(i));
    const from = fs.trace.length;
    const err = await q.add(val(292)).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof IOError, `${err}`);
    assert.equal(causeCode(err), 'ENOSPC');
    const tried = fs.trace.slice(from);
    assert.ok(tried.includes('write:allocate data.00000002'), tried.join(', '));
    assert.ok(!tried.some((s) => s.startsWith('write:record')), 'no record write was attempted');
    assert.deepEqual(segNumbers(fs), [1], 'the partial segment was removed');
    assert.equal(q.stats().added, 292);

    fs.capacity = Infinity;
    await q.add(val(292));
    assert.deepEqual(segNumbers(fs), [1, 2]);
    const got = await drainAll(q.reader());
    assert.deepEqual(got.values, range(0, 293).map((i) => val(i)));
    await q.close();
  });
});

describe('peeking at damage', () => {
  it('tryPeek answers CorruptError with nothing dropped or counted; the consuming read books it once', async () => {
    const fs = await buildStore();
    flipByte(fs, segPath(2), at(10) + 5); // record 70, the head
    const q = await openQ(fs);
    const r = q.reader();
    for (let i = 0; i < 3; i++) {
      const err = await r.tryPeek().then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof CorruptError, `${err}`);
      assert.deepEqual([err.segment, err.position, err.reason], [2, at(10), 'checksum']);
    }
    let st = q.stats();
    assert.deepEqual([st.corruptions, st.lostRecords, st.delivered, st.backlog], [0, 0, 0, TOTAL - COMMITTED]);
    await assert.rejects(r.tryTake(), CorruptError);
    st = q.stats();
    assert.deepEqual([st.corruptions, st.lostRecords], [1, 1]);
    assert.equal((await r.tryPeek())?.value, rec(71));
    assert.equal((await r.tryTake())?.value, rec(71));
    await q.close();
  });

  it('a rewind back across booked damage passes it silently', async () => {
    const fs = await buildStore();
    flipByte(fs, segPath(2), at(12) + 5); // record 72
    const q = await openQ(fs);
    const r = q.reader();
    assert.equal((await r.tryReserve())?.value, rec(70));
    assert.equal((await r.tryReserve())?.value, rec(71));
    await assert.rejects(r.tryReserve(), CorruptError);
    assert.equal((await r.tryReserve())?.value, rec(73));
    await q.rewind();
    const again = [];
    for (let i = 0; i < 3; i++) again.push((await r.tryReserve())?.value);
    assert.deepEqual(again, [70, 71, 73].map(rec));
    const st = q.stats();
    assert.deepEqual([st.corruptions, st.lostRecords], [1, 1]);
    await q.close();
  });
});

describe('a fully committed segment that will not unlink', () => {
  it('is counted as unreclaimed and unlinked on a later try', async () => {
    const fs = new FaultyFileSystem();
    const q = await openQ(fs);
    await q.addBatch(range(0, 61).map(rec)); // 60 fill segment 1, one goes to segment 2
    const r = q.reader();
    fs.inject({ step: 'unlink', error: 'EIO' });
    for (let i = 0; i < 60; i++) await r.tryTake();
    assert.equal(q.stats().unreclaimed, 1);
    assert.equal(q.stats().segments, 1, 'no longer part of the queue');
    assert.deepEqual(segNumbers(fs), [1, 2], 'but still on disk');
    await q.add(rec(61)); // more records, then another commit: reclaim runs again
    await r.tryTake();
    assert.equal(q.stats().unreclaimed, 0);
    assert.deepEqual(segNumbers(fs), [2]);
    await q.close();
  });

  // What an immutable file (chattr +i) does: neither header writes nor the unlink go through.
  for (const last of ['ack', 'take'] as const) {
    it(`and whose last header cannot be written either: the ${last} that emptied it fails or latches the queue; the latched queue removes no file, and a reopen replays from its commit point with no loss reported`, async () => {
      const fs = new FaultyFileSystem();
      const q = await openQ(fs);
      await q.addBatch(range(0, 150).map(rec)); // segments 1 and 2 full, 30 records in 3
      const r = q.reader();
      for (let i = 0; i < 59; i++) await r.tryTake();
      const held = last === 'ack' ? await r.tryReserve() : undefined;
      fs.inject({ step: 'unlink', error: 'EACCES', times: Infinity });
      fs.inject({ step: 'write:header', error: 'EACCES', path: segPath(1), times: Infinity });
      // The ack and a sync at once share the flush that cannot make the header durable: both reject.
      if (held) await Promise.all([assert.rejects(r.ack(held.offset), IOError), assert.rejects(q.sync(), IOError)]);
      else {
        // A take's value is the caller's already: its failed commit latches the queue and replays.
        assert.equal((await r.tryTake())?.value, rec(59));
        // Takes go on handing out records; none of their commits persists, and segment 2 stays.
        for (let i = 60; i < 150; i++) assert.equal((await r.tryTake())?.value, rec(i));
        assert.deepEqual(segNumbers(fs), [1, 2, 3]);
      }
      await assert.rejects(q.close(), IOError);
      fs.clearFaults();
      for (const image of [fs, fs.crashImage()]) {
        const again = await openQ(image);
        try {
          const got = await drainAll(again.reader());
          assert.deepEqual(got, { values: range(59, 150).map(rec), errors: [] }, image === fs ? 'after close' : 'after a power cut');
        } finally {
          await again.close();
        }
      }
    });
  }

  it('holds its last commits in its header: a reopen finds it consumed, reclaims it and delivers none of its records again', async () => {
    const fs = new FaultyFileSystem();
    const q = await openQ(fs);
    await q.addBatch(range(0, 61).map(rec));
    const r = q.reader();
    fs.inject({ step: 'unlink', error: 'EIO' });
    for (let i = 0; i < 60; i++) await r.tryTake();
    assert.equal(q.stats().unreclaimed, 1);
    await q.close(); // close does not retry the unlink
    assert.deepEqual(segNumbers(fs), [1, 2], 'still on disk after close');
    for (const image of [fs, fs.crashImage()]) {
      const again = await openQ(image);
      try {
        assert.deepEqual(await drainAll(again.reader()), { values: [rec(60)], errors: [] }, image === fs ? 'after close' : 'after a power cut');
        assert.deepEqual(segNumbers(image), [2]);
      } finally {
        await again.close();
      }
    }
  });
});

it('a cut segment with a damaged record before the cut keeps every intact record', async () => {
  const { DiskQueue, codecs } = await import('../../../src/diskqueue/index.js');
  const fs = new FaultyFileSystem();
  let q = await DiskQueue.open<string>('/cut', { fs, codec: codecs.utf8, segmentSize: 4096 });
  const recs = ['a', 'b', 'c', 'd'].map((c) => c.repeat(200)); // framed 210 bytes each, from byte 64
  await q.addBatch(recs);
  await q.close();
  const file = fs.readFile('/cut/data.00000001')!;
  file[64 + 2 + 50] ^= 0xff; // damage record a's payload
  fs.writeFile('/cut/data.00000001', file.subarray(0, 64 + 3 * 210 + 100)); // cut inside record d
  q = await DiskQueue.open<string>('/cut', { fs, codec: codecs.utf8, segmentSize: 4096 });
  const r = q.reader();
  const got: string[] = [];
  const events: string[] = [];
  for (let i = 0; i < 10; i++) {
    try {
      const v = await r.tryTake();
      if (!v) break;
      got.push(v.value[0]!);
    } catch (err) {
      assert.ok(err instanceof CorruptError);
      events.push(`${err.reason}:${err.lostRecords}`);
    }
  }
  assert.deepEqual(got, ['b', 'c']);
  assert.deepEqual(events.sort(), ['checksum:1', 'truncated:1']);
  const s = q.stats();
  assert.equal(s.lostRecords, 2);
  assert.equal(s.corruptions, 2);
  await q.close();
});
