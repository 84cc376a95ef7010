/**
 * Every row of the Go spool's "what a crash costs" table, through the
 * fault-injecting file-system seam, each with its outcome and its counter.
 * (The killed-process version of the first rows is crash/crash.test.ts.)
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { CorruptError, GroupLostError, IOError } from '../../../src/spool/index.js';
import type { FileHandle, FileSystem } from '../../../src/storage/fs.js';
import { encodeFrame } from '../../../src/spool/format.js';
import { CURSOR, DIR, FaultyFileSystem, REC_FRAME, appendAll, dec, drain, enc, flip, openS, range, rec, segNumbers, segPath } from '../helpers.js';

/** Three segments of four records each (r0000–r0011). */
const SEG = 8 + 4 * REC_FRAME;
async function threeSegments(fs: FaultyFileSystem) {
  const s = await openS(fs, { segmentBytes: SEG });
  await appendAll(s, 0, 12);
  assert.deepEqual(segNumbers(fs), [1, 2, 3]);
  await s.close();
}

describe('what a crash costs', () => {
  it('a torn frame at the tail is cut at open and counted in discarded; nothing acknowledged is lost', async () => {
    const fs = new FaultyFileSystem();
    let s = await openS(fs);
    await appendAll(s, 0, 3);
    await s.close();
    const whole = fs.readFile(segPath(1))!;
    const torn = encodeFrame(enc('never acknowledged')).subarray(0, 20);
    fs.writeFile(segPath(1), Uint8Array.from([...whole, ...torn]));
    s = await openS(fs);
    assert.equal(s.discarded, 20);
    assert.equal(s.stats().discardedBytes, 20);
    assert.equal(s.stats().lostBytes, 0);
    assert.equal(fs.readFile(segPath(1))!.length, whole.length, 'truncated back to the last whole frame');
    await s.append(enc('next'));
    assert.deepEqual((await drain(s)).values, [...range(0, 3), 'next']);
    await s.close();
  });

  it('a crash with an open appendNoSync group loses the group, and only it', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    await s.append(enc('synced'));
    await s.appendNoSync(enc('g1'));
    await s.appendNoSync(enc('g2'));
    assert.equal(s.stats().unsyncedBytes, 2 * (12 + 2), 'the stats say what a crash would cost now');
    fs.powerCut();
    const s2 = await openS(fs);
    assert.deepEqual((await drain(s2)).values, ['synced']);
    await s2.close();
  });

  it('a group caught by a rollback: the next sync rejects GroupLostError instead of acknowledging', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    await s.appendNoSync(enc('g1'));
    fs.inject({ step: 'sync:data', error: 'EIO' });
    await assert.rejects(s.append(enc('a')), (e) => e instanceof IOError && e.errno === 'EIO');
    await assert.rejects(s.sync(), GroupLostError);
    await s.sync(); // reported once; the producer re-appends
    assert.equal(await s.pop(), undefined);
    await s.close();
  });

  it('a failed fsync mid-append: tail back to its durable size, head clamped, group invalidated, descriptor never synced again', async () => {
    const inner = new FaultyFileSystem();
    const { fs, syncsAfterFailure } = tracking(inner);
    const s = await openS(inner, {}); // warm-up proves nothing; the real one is below
    await s.close();
    const t = await openS(fs as FaultyFileSystem);
    await appendAll(t, 0, 2);
    const durable = inner.readFile(segPath(1))!.length;
    await t.appendNoSync(enc(rec(2)));
    await t.appendNoSync(enc(rec(3)));
    for (let i = 0; i < 3; i++) await (await t.pop())!.commit(); // the head moves into the unsynced group
    inner.inject({ step: 'sync:data', error: 'EIO' });
    await assert.rejects(t.append(enc(rec(4))), IOError);
    assert.equal(inner.readFile(segPath(1))!.length, durable, 'rolled back to the last durable size');
    assert.equal(t.stats().diskBytes, durable);
    assert.equal(t.bytes, 0, 'the head was clamped to the cut');
    assert.equal(t.stats().unsyncedBytes, 0);
    await assert.rejects(t.sync(), GroupLostError);
    await t.append(enc(rec(5)));
    assert.deepEqual(syncsAfterFailure(), 0, 'the descriptor whose fsync failed was not synced again');
    assert.deepEqual((await drain(t)).values, [rec(5)]);
    await t.close();
    const again = await openS(inner);
    assert.deepEqual((await drain(again)).values, [], 'the cursor moved with the clamp');
    await again.close();
  });

  it('a crash between commit and cursor write redelivers the record', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    await appendAll(s, 0, 2);
    fs.inject({ step: 'write:cursor', error: 'EIO' });
    await (await s.pop())!.commit();
    assert.equal(dec((await s.pop())!.data), rec(1), 'the commit advanced in memory');
    fs.processCrash();
    const s2 = await openS(fs);
    assert.deepEqual((await drain(s2)).values, range(0, 2), 'at-least-once: delivered again');
    await s2.close();
  });

  it('a torn cursor fails its checksum and redelivers from the oldest segment', async () => {
    const fs = new FaultyFileSystem();
    await threeSegments(fs);
    let s = await openS(fs, { segmentBytes: SEG });
    for (let i = 0; i < 6; i++) await (await s.pop())!.commit(); // into segment 2
    await s.close();
    assert.deepEqual(segNumbers(fs), [2, 3]);
    const c = fs.readFile(CURSOR)!;
    fs.writeFile(CURSOR, c.subarray(0, 13)); // a rewrite cut short
    s = await openS(fs, { segmentBytes: SEG });
    assert.deepEqual((await drain(s)).values, range(4, 12), 'from the start of the oldest segment: two records again, none lost');
    await s.close();
    flip(fs, CURSOR, 3);
    s = await openS(fs, { segmentBytes: SEG });
    assert.deepEqual((await drain(s)).values, range(8, 12), 'a flipped bit too; only segment 3 is left');
    await s.close();
  });

  it('an unwritable cursor: commits still advance, cursorError reports it, a restart redelivers at most one segment', async () => {
    const fs = new FaultyFileSystem();
    await threeSegments(fs);
    const s = await openS(fs, { segmentBytes: SEG });
    fs.inject({ step: 'write:cursor', error: 'EIO', times: Infinity });
    for (let i = 0; i < 10; i++) await (await s.pop())!.commit();
    assert.ok(s.cursorError instanceof IOError && s.cursorError.errno === 'EIO');
    assert.equal(s.stats().cursorErrors, 10);
    assert.equal(s.stats().committed, 10);
    assert.deepEqual(segNumbers(fs), [3]);
    fs.processCrash();
    const s2 = await openS(fs, { segmentBytes: SEG });
    const again = (await drain(s2)).values;
    assert.deepEqual(again, range(8, 12), 'two delivered records come back, all from one segment');
    assert.ok(again.length - 2 <= 4);
    await s2.close();
  });

  it('a cursor write that works again clears cursorError', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs, { commitSync: true });
    await appendAll(s, 0, 2);
    fs.inject({ step: 'sync:file', error: 'EIO' });
    await (await s.pop())!.commit();
    assert.ok(s.cursorError instanceof IOError);
    await (await s.pop())!.commit();
    assert.equal(s.cursorError, undefined);
    assert.equal(s.stats().cursorErrors, 1);
    await s.close();
  });

  it('one flipped payload byte costs one record: CorruptError, the spool advances, lostBytes counts the frame', async () => {
    const fs = new FaultyFileSystem();
    await threeSegments(fs);
    flip(fs, segPath(2), 8 + REC_FRAME + 12 + 2); // r0005's payload
    const s = await openS(fs, { segmentBytes: SEG });
    const woke = s.signal();
    const d = await drain(s);
    await woke;
    assert.deepEqual(d.values, range(0, 12).filter((r) => r !== rec(5)));
    assert.equal(d.errors.length, 1);
    const e = d.errors[0] as CorruptError;
    assert.ok(e instanceof CorruptError && e.reason === 'checksum' && e.lostRecords === 1 && e.segment === 2);
    assert.equal(s.stats().lostBytes, REC_FRAME);
    assert.equal(s.stats().lostSegments, 0);
    await s.close();
  });

  for (const [how, mask] of [['upward', 0x01], ['downward', 0x08]] as const) {
    it(`one flipped length byte (${how}) costs up to its segment, detected and counted`, async () => {
      const fs = new FaultyFileSystem();
      await threeSegments(fs);
      // r0005's length: 5 → 5 ^ mask. Upward within the file desynchronizes
      // too; 0x01000005 would overrun; both must drop the rest of segment 2.
      flip(fs, segPath(2), 8 + REC_FRAME + (how === 'upward' ? 0 : 3), how === 'upward' ? mask : 0x04);
      const s = await openS(fs, { segmentBytes: SEG });
      const d = await drain(s);
      assert.deepEqual(d.values, [...range(0, 5), ...range(8, 12)]);
      assert.equal(d.errors.length, 1);
      assert.ok(d.errors[0] instanceof CorruptError);
      assert.equal(s.stats().lostBytes, 3 * REC_FRAME);
      assert.equal(s.stats().lostSegments, 1);
      await s.close();
    });
  }

  it('a damaged segment header: dropped at open, one CorruptError, its bytes in lostBytes', async () => {
    const fs = new FaultyFileSystem();
    await threeSegments(fs);
    flip(fs, segPath(2), 1);
    const s = await openS(fs, { segmentBytes: SEG });
    assert.deepEqual(segNumbers(fs), [1, 3]);
    const d = await drain(s);
    assert.deepEqual(d.values, [...range(0, 4), ...range(8, 12)]);
    assert.equal(d.errors.length, 1);
    assert.ok(d.errors[0] instanceof CorruptError && (d.errors[0] as CorruptError).reason === 'header');
    assert.equal(s.stats().lostBytes, SEG);
    assert.equal(s.stats().lostSegments, 1);
    await s.close();
  });

  it('a zero-length segment (an aborted create) is removed silently', async () => {
    const fs = new FaultyFileSystem();
    await threeSegments(fs);
    fs.writeFile(segPath(4), new Uint8Array(0));
    const s = await openS(fs, { segmentBytes: SEG });
    assert.deepEqual(segNumbers(fs), [1, 2, 3]);
    const d = await drain(s);
    assert.deepEqual(d.values, range(0, 12));
    assert.equal(d.errors.length, 0);
    const st = s.stats();
    assert.equal(st.lostBytes + st.lostSegments + st.foreignSegments + st.discardedBytes, 0, 'not a loss event');
    await s.close();
  });

  it('a segment deleted underneath: the head skips it, the error names ENOENT, the spool keeps going', async () => {
    const fs = new FaultyFileSystem();
    await threeSegments(fs);
    const s = await openS(fs, { segmentBytes: SEG });
    fs.remove(segPath(1));
    const d = await drain(s);
    assert.deepEqual(d.values, range(4, 12));
    assert.equal(d.errors.length, 1);
    assert.ok(d.errors[0] instanceof IOError && (d.errors[0] as IOError).errno === 'ENOENT');
    assert.equal(s.stats().lostSegments, 1);
    assert.equal(s.stats().lostBytes, SEG - 8);
    await s.close();
  });

  it('an unknown format version: the segment is dropped silently and counted as foreign', async () => {
    const fs = new FaultyFileSystem();
    await threeSegments(fs);
    flip(fs, segPath(2), 7, 0x03); // version 1 → 2
    const s = await openS(fs, { segmentBytes: SEG });
    const d = await drain(s);
    assert.deepEqual(d.values, [...range(0, 4), ...range(8, 12)]);
    assert.equal(d.errors.length, 0);
    assert.equal(s.stats().foreignSegments, 1);
    assert.equal(s.stats().foreignBytes, SEG);
    assert.equal(s.stats().lostBytes, 0);
    await s.close();
  });
});

/** A seam that remembers which descriptor's fdatasync failed and counts later syncs on it. */
function tracking(inner: FaultyFileSystem): { fs: FileSystem; syncsAfterFailure: () => number } {
  const failed = new Set<FileHandle>();
  let after = 0;
  const fs: FileSystem = {
    open(path, mode) {
      const h = inner.open(path, mode);
      const w: FileHandle = {
        path,
        pwrite: (b, p, s) => h.pwrite(b, p, s),
        pread: (b, p) => h.pread(b, p),
        size: () => h.size(),
        truncate: (n) => h.truncate(n),
        allocate: (n) => h.allocate(n),
        close: () => h.close(),
        datasync: async (step) => {
          if (failed.has(w)) after++;
          try {
            await h.datasync(step);
          } catch (err) {
            failed.add(w);
            throw err;
          }
        },
      };
      return w;
    },
    readdir: (d) => inner.readdir(d),
    mkdirp: (d) => inner.mkdirp(d),
    unlink: (p) => inner.unlink(p),
    rename: (a, b) => inner.rename(a, b),
    syncDir: (d) => inner.syncDir(d),
    lock: (d) => inner.lock(d),
  };
  return { fs, syncsAfterFailure: () => after };
}

void DIR;

describe('staged appendNoSync frames', () => {
  it('are written in one pwrite per burst, readable at once', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    const writes = () => fs.trace.filter((t) => t.startsWith('write:record')).length;
    const before = writes();
    for (let i = 0; i < 100; i++) await s.appendNoSync(enc(rec(i)));
    assert.equal(dec((await s.pop())!.data), rec(0), 'a pop sees them');
    assert.equal(writes() - before, 1);
    await s.sync();
    assert.deepEqual((await drain(s)).values, range(0, 100));
    await s.close();
  });

  it('a failed write of staged frames cuts them and the next sync reports the group lost', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    await s.append(enc('kept'));
    for (let i = 0; i < 5; i++) await s.appendNoSync(enc(rec(i)));
    fs.inject({ step: 'write:record', error: 'short' });
    await assert.rejects(s.sync(), GroupLostError);
    assert.equal(s.stats().unsyncedBytes, 0);
    assert.equal(fs.readFile(segPath(1))!.length, 8 + 12 + 4, 'the half-written frames were cut');
    await s.appendNoSync(enc('again'));
    await s.sync();
    assert.deepEqual((await drain(s)).values, ['kept', 'again']);
    await s.close();
  });

  it('are written at the end of the event-loop turn without any other call', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    await s.appendNoSync(enc('a'));
    const size = () => fs.readFile(segPath(1))!.length;
    assert.equal(size(), 8);
    await new Promise((r) => setImmediate(r));
    assert.equal(size(), 8 + 12 + 1);
    await s.close();
  });
});

describe('rollback across a rotation', () => {
  it('a failed fsync removes the segments created since the last durable point and cuts the older one back', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs, { segmentBytes: SEG });
    await appendAll(s, 0, 2);
    for (let i = 2; i < 10; i++) await s.appendNoSync(enc(rec(i))); // spills into segments 2 and 3
    assert.deepEqual(segNumbers(fs), [1, 2, 3]);
    fs.inject({ step: 'sync:data', error: 'EIO' });
    await assert.rejects(s.sync(), GroupLostError);
    assert.deepEqual(segNumbers(fs), [1], 'never-durable segments are gone');
    assert.equal(fs.readFile(segPath(1))!.length, 8 + 2 * REC_FRAME);
    await s.append(enc(rec(10)));
    assert.deepEqual(segNumbers(fs), [1]);
    for (let i = 11; i < 14; i++) await s.append(enc(rec(i)));
    assert.deepEqual(segNumbers(fs), [1, 4], 'segment numbers are never reused');
    assert.deepEqual((await drain(s)).values, [rec(0), rec(1), ...range(10, 14)]);
    await s.close();
    fs.powerCut();
    const again = await openS(fs, { segmentBytes: SEG });
    const rest = (await drain(again)).values;
    assert.ok(rest.length <= 4, 'at most one segment is delivered again after a power cut');
    await again.close();
  });
});

describe('a rollback keeps what was durable', () => {
  // A failed fdatasync cuts only the bytes past the last successful one. A
  // record popped before it that ends below the cut is the same record at the
  // same place: its commit and requeue work; only a record that was cut is stale.

  it('a failed requeue leaves the record at the head: requeue again moves it, and commit retires it', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    try {
      for (const r of ['A', 'B', 'C']) await s.append(enc(r));
      const p = (await s.pop())!;
      fs.inject({ step: 'sync:data', error: 'EIO' });
      await assert.rejects(s.requeue(p), IOError);
      assert.equal(dec((await s.pop())!.data), 'A', 'still at the head');
      assert.equal(await s.requeue(p), true, 'the head moves on a second try');
      assert.deepEqual((await drain(s)).values, ['B', 'C', 'A']);
    } finally {
      await s.close();
    }
    const fs2 = new FaultyFileSystem();
    const t = await openS(fs2);
    try {
      for (const r of ['A', 'B', 'C']) await t.append(enc(r));
      const p = (await t.pop())!;
      fs2.inject({ step: 'sync:data', error: 'EIO' });
      await assert.rejects(t.requeue(p), IOError);
      await p.commit();
      assert.deepEqual((await drain(t)).values, ['B', 'C'], 'the commit retired A');
    } finally {
      await t.close();
    }
  });

  it('calls held behind a failed requeue find the record still at the head, in call order', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    try {
      for (const r of ['A', 'B', 'C']) await s.append(enc(r));
      const p = (await s.pop())!;
      fs.inject({ step: 'sync:data', error: 'EIO' });
      const [first, pop, second, commit] = await Promise.allSettled([s.requeue(p), s.pop(), s.requeue(p), p.commit()]);
      assert.ok(first.status === 'rejected' && first.reason instanceof IOError, `first requeue: ${String(first.status)}`);
      assert.equal(pop.status === 'fulfilled' && pop.value && dec(pop.value.data), 'A');
      assert.deepEqual(second, { status: 'fulfilled', value: true }, 'the second requeue moves it');
      assert.equal(commit.status, 'fulfilled'); // after the move: a no-op
      assert.deepEqual((await drain(s)).values, ['B', 'C', 'A']);
    } finally {
      await s.close();
    }
  });

  it('a durable record popped before a lost appendNoSync group still commits', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    try {
      for (const r of ['A', 'B']) await s.append(enc(r));
      const p = (await s.pop())!;
      await s.appendNoSync(enc('C'));
      fs.inject({ step: 'sync:data', error: 'EIO' });
      await assert.rejects(s.sync(), GroupLostError);
      await p.commit();
      assert.deepEqual((await drain(s)).values, ['B']);
    } finally {
      await s.close();
    }
  });

  it('a record that was durable by the time of a later rollback survives it too', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    try {
      await s.appendNoSync(enc('A'));
      await s.appendNoSync(enc('B'));
      const p = (await s.pop())!; // popped before it was durable
      await s.sync();
      await s.appendNoSync(enc('C'));
      fs.inject({ step: 'sync:data', error: 'EIO' });
      await assert.rejects(s.sync(), GroupLostError);
      assert.equal(await s.requeue(p), true);
      assert.deepEqual((await drain(s)).values, ['B', 'A']);
    } finally {
      await s.close();
    }
  });

  it('a record the rollback cut stays stale, even once another record sits at its offset and is durable', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    try {
      await s.append(enc('A'));
      await s.appendNoSync(enc('X'));
      const a = (await s.pop())!;
      await a.commit();
      const x = (await s.pop())!; // X: not durable
      fs.inject({ step: 'sync:data', error: 'EIO' });
      await assert.rejects(s.sync(), GroupLostError);
      await s.append(enc('Y')); // same size, written where X was
      await s.append(enc('Z'));
      // A second rollback that cuts less must not make X's pop valid again.
      await s.appendNoSync(enc('W'));
      fs.inject({ step: 'sync:data', error: 'EIO' });
      await assert.rejects(s.sync(), GroupLostError);
      assert.equal(await s.requeue(x), false, 'X was cut: requeue does nothing');
      await x.commit(); // a no-op: it must not retire Y
      assert.deepEqual((await drain(s)).values, ['Y', 'Z']);
    } finally {
      await s.close();
    }
  });
});
