/** The spool's API one call at a time: appends, pops, commits, requeue, caps, signal, stats, close, options, the lock. */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';
import {
  Spool,
  ClosedError,
  GroupLostError,
  ExceedsCapError,
  FullError,
  InvalidArgumentError,
  LockedError,
  RecordTooLargeError,
  DEFAULT_MAX_BYTES,
  DEFAULT_SEGMENT_BYTES,
  FRAME_OVERHEAD,
  MAX_RECORD_BYTES,
  UNBOUNDED,
} from '../../src/spool/index.js';
import { tempDir } from '../helpers/tmp.js';
import { CorruptError, DIR, FaultyFileSystem, appendAll, dec, drain, enc, openS, range, rec, REC_FRAME, segNumbers, segPath } from './helpers.js';

describe('append and pop', () => {
  it('delivers in order across segments and reopens', async () => {
    const fs = new FaultyFileSystem();
    let s = await openS(fs, { segmentBytes: 100 });
    await appendAll(s, 0, 20);
    assert.ok(s.segments > 3, `rotated into ${s.segments} segments`);
    for (let i = 0; i < 5; i++) {
      const p = (await s.pop())!;
      assert.equal(dec(p.data), rec(i));
      await p.commit();
    }
    await s.close();
    await assert.rejects(drain(s), ClosedError);
    s = await openS(fs, { segmentBytes: 100 });
    const rest = await drain(s);
    // The reopen may redeliver up to one segment, never skip or reorder.
    assert.ok(rest.values.length >= 15);
    assert.deepEqual(rest.values.slice(-15), range(5, 20));
    assert.deepEqual(rest.values, range(20 - rest.values.length, 20));
    assert.equal(s.segments, 1, 'consumed segments were deleted');
    await s.close();
  });

  it('pop does not remove: two pops without a commit return the same record', async () => {
    const s = await openS(new FaultyFileSystem());
    await s.append(enc('a'));
    await s.append(enc('b'));
    const p1 = (await s.pop())!;
    const p2 = (await s.pop())!;
    assert.equal(dec(p1.data), 'a');
    assert.equal(dec(p2.data), 'a');
    await p1.commit();
    await p2.commit(); // the head moved on: a no-op, not a retirement of "b"
    await p1.commit();
    assert.equal(dec((await s.pop())!.data), 'b');
    assert.equal(s.stats().committed, 1);
    assert.equal(s.stats().popped, 3);
    await s.close();
  });

  it('commit after close is a no-op, and the record comes back on reopen', async () => {
    const fs = new FaultyFileSystem();
    let s = await openS(fs);
    await s.append(enc('a'));
    const p = (await s.pop())!;
    await s.close();
    await p.commit();
    s = await openS(fs);
    assert.equal(dec((await s.pop())!.data), 'a');
    await s.close();
  });

  it('the returned data is the caller\'s own copy', async () => {
    const s = await openS(new FaultyFileSystem());
    const src = enc('xyz');
    await s.append(src);
    src[0] = 0;
    const p = (await s.pop())!;
    p.data[1] = 0;
    assert.equal(dec((await s.pop())!.data), 'xyz');
    await s.close();
  });

  it('bytes, segments and diskBytes follow the frames', async () => {
    const s = await openS(new FaultyFileSystem(), { segmentBytes: 8 + 2 * REC_FRAME });
    assert.equal(s.bytes, 0);
    await appendAll(s, 0, 3);
    assert.equal(s.segments, 2);
    // Two frames plus one frame and the second segment's header.
    assert.equal(s.bytes, 3 * REC_FRAME + 8);
    assert.equal(s.stats().diskBytes, 16 + 3 * REC_FRAME);
    await (await s.pop())!.commit();
    assert.equal(s.bytes, 2 * REC_FRAME + 8);
    await (await s.pop())!.commit();
    assert.equal(s.segments, 1, 'the consumed segment was retired');
    assert.equal(s.bytes, REC_FRAME);
    await s.close();
  });
});

describe('caps', () => {
  it('maxBytes 0 means 64 MiB; UNBOUNDED must be asked for and reports cap 0', async () => {
    assert.equal(DEFAULT_MAX_BYTES, 64 << 20);
    assert.equal(DEFAULT_SEGMENT_BYTES, 8 << 20);
    const a = await openS(new FaultyFileSystem());
    assert.equal(a.cap, 64 << 20);
    await a.close();
    const b = await openS(new FaultyFileSystem(), { maxBytes: 0 });
    assert.equal(b.cap, 64 << 20);
    await b.close();
    const c = await openS(new FaultyFileSystem(), { maxBytes: UNBOUNDED, segmentBytes: 1 << 20 });
    assert.equal(c.cap, 0);
    await c.append(new Uint8Array(65 << 20)); // past the default cap
    assert.equal(c.stats().maxBytes, 0);
    await c.close();
  });

  it('FullError leaves the spool untouched and clears as the consumer commits', async () => {
    const s = await openS(new FaultyFileSystem(), { maxBytes: 3 * REC_FRAME });
    await appendAll(s, 0, 3);
    const before = s.stats();
    await assert.rejects(s.append(enc(rec(3))), (e) => e instanceof FullError && !(e instanceof ExceedsCapError) && e.code === 'ERR_FULL');
    await assert.rejects(s.appendNoSync(enc(rec(3))), FullError);
    assert.equal(s.bytes, before.backlogBytes);
    assert.equal(s.stats().diskBytes, before.diskBytes);
    assert.equal(s.stats().full, 2);
    await (await s.pop())!.commit();
    await s.append(enc(rec(3)));
    assert.deepEqual((await drain(s)).values, range(1, 4));
    await s.close();
  });

  it('ExceedsCapError (a FullError) for len > maxBytes − 12; exactly maxBytes − 12 fits an empty spool', async () => {
    const s = await openS(new FaultyFileSystem(), { maxBytes: 64 });
    await assert.rejects(s.append(new Uint8Array(64 - FRAME_OVERHEAD + 1)), (e) => e instanceof ExceedsCapError && e instanceof FullError && e.code === 'ERR_EXCEEDS_CAP');
    await s.append(new Uint8Array(s.cap - FRAME_OVERHEAD));
    assert.equal(s.bytes, 64);
    await assert.rejects(s.append(new Uint8Array(0)), (e) => e instanceof FullError && !(e instanceof ExceedsCapError));
    assert.equal(s.stats().full, 2);
    await s.close();
  });

  it('RecordTooLargeError above MAX_RECORD_BYTES, whatever the cap', async () => {
    assert.equal(MAX_RECORD_BYTES, 2 ** 32 - 1);
    const s = await openS(new FaultyFileSystem(), { maxBytes: UNBOUNDED });
    const huge = new Uint8Array(1);
    Object.defineProperty(huge, 'length', { value: 2 ** 32 });
    await assert.rejects(s.append(huge), (e) => e instanceof RecordTooLargeError && !(e instanceof FullError));
    assert.equal(s.bytes, 0);
    await s.close();
  });

  it('a full spool whose head is undeliverable can still requeue it (the cap is ignored)', async () => {
    const s = await openS(new FaultyFileSystem(), { maxBytes: 2 * REC_FRAME });
    await appendAll(s, 0, 2);
    await assert.rejects(s.append(enc(rec(2))), FullError);
    const p = (await s.pop())!;
    assert.equal(await s.requeue(p), true);
    assert.deepEqual((await drain(s)).values, [rec(1), rec(0)]);
    await s.close();
  });
});

describe('requeue', () => {
  it('moves the head record to the back', async () => {
    const s = await openS(new FaultyFileSystem());
    await appendAll(s, 0, 3);
    const bytes = s.bytes;
    assert.equal(await s.requeue((await s.pop())!), true);
    assert.equal(s.bytes, bytes, 'size-neutral');
    assert.deepEqual((await drain(s)).values, [rec(1), rec(2), rec(0)]);
    await s.close();
  });

  it('returns false for the only record and writes nothing', async () => {
    const s = await openS(new FaultyFileSystem());
    await s.append(enc('only'));
    const disk = s.stats().diskBytes;
    assert.equal(await s.requeue((await s.pop())!), false);
    assert.equal(s.stats().diskBytes, disk);
    assert.equal(s.stats().appended, 1);
    assert.deepEqual((await drain(s)).values, ['only']);
    await s.close();
  });

  it('returns false and writes nothing for a record already committed, or one behind the head', async () => {
    const s = await openS(new FaultyFileSystem());
    await appendAll(s, 0, 4);
    const [p0, p1] = await s.popBatch(2);
    assert.equal(await s.requeue(p1!), false, 'behind the head: not requeued');
    await p0!.commit();
    assert.equal(await s.requeue(p0!), false, 'committed: not requeued');
    assert.equal(await s.requeue(p0!), false);
    assert.equal(s.stats().appended, 4, 'no copy was written');
    assert.deepEqual((await drain(s)).values, range(1, 4));
    await s.close();
  });

  it("returns false and writes nothing for a record of another spool, or of this directory before a reopen, at the same place as this spool's head", async () => {
    const fsA = new FaultyFileSystem();
    const a = await openS(fsA);
    const b = await openS(new FaultyFileSystem());
    try {
      await a.append(enc('AAA'));
      await b.append(enc('BBB'));
      await b.append(enc('CCC'));
      const fromA = (await a.pop())!;
      assert.equal(await b.requeue(fromA), false, "a's record names b's head segment number and offset");
      assert.equal(b.stats().appended, 2, 'no copy was written');
      assert.deepEqual((await drain(b)).values, ['BBB', 'CCC'], "b's head is still there");
      await a.append(enc('AA2'));
      await a.close();
      const again = await openS(fsA);
      try {
        assert.equal(await again.requeue(fromA), false, 'a record popped before the close does nothing after it');
        assert.deepEqual((await drain(again)).values, ['AAA', 'AA2']);
      } finally {
        await again.close();
      }
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('rejects what pop did not return', async () => {
    const s = await openS(new FaultyFileSystem());
    await assert.rejects(s.requeue({ data: enc('x'), commit: async () => {} } as never), InvalidArgumentError);
    await s.close();
  });
});

describe('signal', () => {
  it('refuses a signal option that is not an AbortSignal', async () => {
    const s = await openS(new FaultyFileSystem());
    try {
      for (const bad of [5, 'x', {}]) await assert.rejects(s.signal({ signal: bad as unknown as AbortSignal }), InvalidArgumentError, String(bad));
    } finally {
      await s.close();
    }
  });

  it('settles on the next append; one wake-up with nobody waiting is remembered, once', async () => {
    const s = await openS(new FaultyFileSystem());
    let woke = false;
    const w = s.signal().then(() => (woke = true));
    await new Promise((r) => setImmediate(r));
    assert.equal(woke, false);
    await s.appendNoSync(enc('a'));
    await w;
    await s.appendNoSync(enc('b'));
    await s.appendNoSync(enc('c'));
    await s.signal(); // remembered
    let second = false;
    const w2 = s.signal().then(() => (second = true));
    await new Promise((r) => setImmediate(r));
    assert.equal(second, false, 'only one wake-up is kept, like a one-slot channel');
    await s.append(enc('d'));
    await w2;
    await s.close();
  });

  it('rejects with the abort reason, and with ClosedError on close', async () => {
    const s = await openS(new FaultyFileSystem());
    const ac = new AbortController();
    const w = s.signal({ signal: ac.signal });
    ac.abort(new Error('stop'));
    await assert.rejects(w, /stop/);
    const w2 = s.signal();
    await s.close();
    await assert.rejects(w2, ClosedError);
    await assert.rejects(s.signal(), ClosedError);
  });
});

describe('close, options, lock, files', () => {
  it('close syncs an open appendNoSync group and is idempotent; calls after it reject', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    await s.appendNoSync(enc('a'));
    assert.ok(s.stats().unsyncedBytes > 0);
    await Promise.all([s.close(), s.close()]);
    assert.equal(s.stats().unsyncedBytes, 0);
    await assert.rejects(s.append(enc('b')), ClosedError);
    await assert.rejects(s.appendNoSync(enc('b')), ClosedError);
    await assert.rejects(s.sync(), ClosedError);
    await assert.rejects(s.pop(), ClosedError);
    fs.powerCut();
    const s2 = await openS(fs);
    assert.deepEqual((await drain(s2)).values, ['a']);
    await s2.close();
  });

  it('bad options and arguments are InvalidArgumentError', async () => {
    const fs = new FaultyFileSystem();
    await assert.rejects(Spool.open('', { fs }), InvalidArgumentError);
    await assert.rejects(openS(fs, { maxBytes: -2 }), InvalidArgumentError);
    await assert.rejects(openS(fs, { segmentBytes: 1.5 }), InvalidArgumentError);
    await assert.rejects(openS(fs, { commitSync: 'yes' as never }), InvalidArgumentError);
    const s = await openS(fs);
    await assert.rejects(s.append('text' as never), InvalidArgumentError);
    await s.close();
  });

  it('an unknown option is refused with InvalidArgumentError naming it, and nothing is created', async () => {
    const fs = new FaultyFileSystem();
    await assert.rejects(openS(fs, { maxbytes: 100 } as never), (e) => {
      assert.ok(e instanceof InvalidArgumentError, String(e));
      assert.match(e.message, /unknown Spool option "maxbytes" \(known: segmentBytes, maxBytes, commitSync, fs\)/);
      return true;
    });
    assert.throws(() => fs.readdir(DIR), (e: NodeJS.ErrnoException) => e.code === 'ENOENT', 'the directory was not created');
  });

  it('option values in errors print as values: a string is quoted', async () => {
    const fs = new FaultyFileSystem();
    await assert.rejects(openS(fs, { maxBytes: '1024' as never }), /maxBytes must be .*, got "1024"$/);
    await assert.rejects(openS(fs, { segmentBytes: '8' as never }), /got "8"$/);
    await assert.rejects(openS(fs, { commitSync: 'true' as never }), /got "true"$/);
    const s = await openS(fs);
    try {
      await assert.rejects(s.popBatch('2' as never), /max must be a positive integer, got "2"$/);
    } finally {
      await s.close();
    }
  });

  it('one spool per directory: a second open is LockedError until the first closes', async () => {
    const dir = tempDir('ferry-spool-');
    const a = await Spool.open(dir);
    await assert.rejects(Spool.open(dir), LockedError);
    await a.close();
    const b = await Spool.open(dir);
    await b.close();
  });

  it('files are private: 0600 files in a 0700 directory', async () => {
    const dir = `${tempDir('ferry-spool-')}/inner`;
    const s = await Spool.open(dir);
    await s.append(enc('a'));
    await (await s.pop())!.commit();
    await s.close();
    assert.equal(statSync(dir).mode & 0o777, 0o700);
    for (const n of ['cursor', '00000000000000000001.seg']) assert.equal(statSync(`${dir}/${n}`).mode & 0o777, 0o600, n);
  });

  it('a new spool starts with one empty segment and no cursor errors', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    assert.deepEqual(segNumbers(fs), [1]);
    assert.equal(s.cursorError, undefined);
    assert.equal(s.discarded, 0);
    assert.equal(await s.pop(), undefined);
    await s.close();
  });
});

describe('popBatch', () => {
  it('returns up to max records from the head across segments; committed in order they retire, out of order they wait', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs, { segmentBytes: 8 + 2 * REC_FRAME });
    await appendAll(s, 0, 5);
    const b = await s.popBatch(4);
    assert.deepEqual(b.map((p) => dec(p.data)), range(0, 4));
    await b[3]!.commit(); // not at the head yet: a no-op
    assert.equal(s.stats().committed, 0);
    for (const p of b) await p.commit();
    assert.equal(s.stats().committed, 4);
    assert.deepEqual((await s.popBatch(10)).map((p) => dec(p.data)), [rec(4)]);
    assert.deepEqual(await s.popBatch(1).then((x) => x.length), 1);
    await (await s.pop())!.commit();
    assert.deepEqual(await s.popBatch(3), []);
    await s.close();
  });

  it('stops before damage, which the head then reports', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    await appendAll(s, 0, 4);
    await s.close();
    const bytes = fs.readFile(segPath(1))!;
    bytes[8 + 2 * REC_FRAME + 13]! ^= 1; // r0002's payload
    fs.writeFile(segPath(1), bytes);
    const t = await openS(fs);
    const b = await t.popBatch(10);
    assert.deepEqual(b.map((p) => dec(p.data)), range(0, 2));
    for (const p of b) await p.commit();
    await assert.rejects(t.popBatch(10), CorruptError);
    assert.deepEqual((await t.popBatch(10)).map((p) => dec(p.data)), [rec(3)]);
    await t.close();
  });
});

describe('close with an open group that cannot be synced', () => {
  it('rejects GroupLostError, still releases the directory, and a reopen finds the group gone', async () => {
    const fs = new FaultyFileSystem();
    const s = await openS(fs);
    await s.append(enc('kept'));
    await s.appendNoSync(enc('lost'));
    fs.inject({ step: 'sync:data', error: 'EIO' });
    await assert.rejects(s.close(), GroupLostError);
    await assert.rejects(s.close(), GroupLostError, 'idempotent: the same outcome');
    const again = await openS(fs);
    assert.deepEqual((await drain(again)).values, ['kept']);
    await again.close();
  });
});
