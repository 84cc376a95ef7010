/**
 * The consumer side under faults: a record the codec refuses, the ack ledger seen
 * through power cuts, backpressure, and enqueue stamps.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DiskQueue, codecs, packOffset, type Codec } from '../../../src/diskqueue/index.js';
import { ClosedError, CodecError, FullError, OffsetError } from '../../../src/errors.js';
import { FaultyFileSystem, openQ, drainAll, DIR, SEG } from './helpers.js';

/** utf8, except that the value 'poison' never decodes. */
const picky: Codec<string> = {
  encode: codecs.utf8.encode,
  decode(b) {
    const v = codecs.utf8.decode(b);
    if (v === 'poison') throw new Error('cannot decode poison');
    return v;
  },
};

/** Values of the durable image a power cut right now would leave. */
async function afterPowerCut(fs: FaultyFileSystem): Promise<string[]> {
  const q = await openQ(fs.crashImage());
  const got = await drainAll(q.reader());
  await q.close();
  assert.deepEqual(got.errors, []);
  return got.values;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a record the codec refuses (checklist 10)', () => {
  it('stays at the head; peek neither consumes nor counts; skip discards it', async () => {
    const fs = new FaultyFileSystem();
    const q = await DiskQueue.open(DIR, { fs, codec: picky, segmentSize: SEG });
    for (const v of ['a', 'poison', 'b']) await q.add(v);
    const r = q.reader();
    assert.equal((await r.tryTake())?.value, 'a');
    const before = q.stats();
    await assert.rejects(r.tryTake(), CodecError);
    await assert.rejects(r.tryReserve(), CodecError);
    await assert.rejects(r.tryPeek(), CodecError);
    assert.deepEqual(q.stats(), before);
    assert.equal(await r.skip(), true);
    assert.equal((await r.tryPeek())?.value, 'b');
    assert.deepEqual(q.stats().backlog, 1);
    assert.equal((await r.tryTake())?.value, 'b');
    assert.equal(await r.skip(), false);
    await q.close();
    assert.deepEqual(await afterPowerCut(fs), []);
  });

  it('ends a batch before it: takeBatch and reserveBatch hand out the records ahead of it, then it is the head', async () => {
    const fs = new FaultyFileSystem();
    const q = await DiskQueue.open(DIR, { fs, codec: picky, segmentSize: SEG });
    await q.addBatch(['a', 'b', 'poison', 'c', 'd', 'poison', 'e']);
    const r = q.reader();
    assert.deepEqual(await r.takeBatch(10), ['a', 'b']);
    await assert.rejects(r.takeBatch(10), CodecError);
    assert.equal(await r.skip(), true);
    const res = await r.reserveBatch(10);
    assert.deepEqual(
      res.map((x) => x.value),
      ['c', 'd'],
    );
    await assert.rejects(r.reserveBatch(10), CodecError);
    assert.equal(q.stats().backlog, 4, 'c, d (reserved), poison, e');
    await r.ackBatch(res.map((x) => x.offset));
    assert.equal(await r.skip(), true);
    assert.deepEqual(await r.takeBatch(10), ['e']);
    assert.equal(q.stats().delivered, 5);
    await q.close();
    assert.deepEqual(await afterPowerCut(fs), []);
  });

  it('requeue moves it to the back, even on a full queue', async () => {
    const fs = new FaultyFileSystem();
    const frame = 1 + 6 + 8; // every value below is 6 bytes
    const q = await DiskQueue.open(DIR, { fs, codec: picky, segmentSize: SEG, maxBytes: 3 * frame });
    for (const v of ['poison', 'val--1', 'val--2']) await q.add(v);
    await assert.rejects(q.add('val--3'), FullError);
    const r = q.reader();
    await assert.rejects(r.tryTake(), CodecError);
    assert.equal(await r.requeue(), true);
    assert.equal(q.stats().backlog, 3);
    assert.equal((await r.tryTake())?.value, 'val--1');
    assert.equal((await r.tryTake())?.value, 'val--2');
    await assert.rejects(r.tryTake(), CodecError);
    await q.close();
    assert.deepEqual(await afterPowerCut(fs), ['poison']); // the rotated copy, durable
  });
});

describe('the ack ledger through power cuts (checklist 11)', () => {
  it('ack retires only its record; only the contiguous acknowledged prefix is durable; ack is idempotent', async () => {
    const fs = new FaultyFileSystem();
    const q = await openQ(fs);
    for (const v of ['a', 'b', 'c', 'd']) await q.add(v);
    const r = q.reader();
    const [a, b, c] = [(await r.tryReserve())!, (await r.tryReserve())!, (await r.tryReserve())!];
    await r.ack(c.offset);
    assert.deepEqual(await afterPowerCut(fs), ['a', 'b', 'c', 'd']);
    assert.equal(q.stats().backlog, 4);
    await r.ack(a.offset);
    assert.deepEqual(await afterPowerCut(fs), ['b', 'c', 'd']);
    await r.ack(a.offset); // idempotent
    await r.ack(c.offset);
    // Offsets that name no reserved record: inside one, past the read cursor, another segment.
    await assert.rejects(r.ack(b.offset + 1n), OffsetError);
    await assert.rejects(r.ack(c.offset + 10n), OffsetError); // where 'd' starts: never reserved
    await assert.rejects(r.ack(packOffset(99, 64)), OffsetError);
    assert.deepEqual(await afterPowerCut(fs), ['b', 'c', 'd']);
    await r.ack(b.offset);
    assert.deepEqual(await afterPowerCut(fs), ['d']);
    assert.equal(q.stats().backlog, 1);
    await q.close();
  });

  it('commit inside a record rounds down; rewind never un-commits', async () => {
    const fs = new FaultyFileSystem();
    const q = await openQ(fs);
    for (const v of ['a', 'b', 'c']) await q.add(v);
    const r = q.reader();
    await r.tryReserve();
    const b = (await r.tryReserve())!;
    await r.tryReserve();
    await r.commit(b.offset + 2n);
    assert.deepEqual(await afterPowerCut(fs), ['c']);
    await q.rewind();
    assert.deepEqual(await drainAll(r), { values: ['c'], errors: [] });
    await q.close();
  });
});

describe('backpressure (checklist 12)', () => {
  const frame = 1 + 1 + 8;

  it('a full queue refuses and counts, and is unchanged', async () => {
    const fs = new FaultyFileSystem();
    const q = await openQ(fs, { maxBytes: 2 * frame });
    await q.add('a');
    await q.add('b');
    const before = q.stats();
    const from = fs.trace.length;
    await assert.rejects(q.add('c'), FullError);
    const err = await q.addBatch(['c', 'd']).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof FullError);
    assert.equal(err.placed, 0);
    assert.deepEqual(fs.trace.slice(from), [], 'nothing was written');
    assert.deepEqual(q.stats(), { ...before, rejectedFull: before.rejectedFull + 2 });
    await q.close();
  });

  it('maxSegments refuses the segment past the cap', async () => {
    const fs = new FaultyFileSystem();
    const q = await openQ(fs, { maxSegments: 2 });
    const big = 'x'.repeat(2000);
    for (let i = 0; i < 4; i++) await q.add(big);
    await assert.rejects(q.add(big), FullError);
    assert.equal(q.stats().segments, 2);
    assert.equal(q.stats().rejectedFull, 1);
    await q.close();
  });

  it('addWait unblocks on commit, on abort and on close', async () => {
    const fs = new FaultyFileSystem();
    const q = await openQ(fs, { maxBytes: 2 * frame });
    await q.add('a');
    await q.add('b');
    const r = q.reader();

    let settled = false;
    const waiting = q.addWait('c').then(() => (settled = true));
    await sleep(20);
    assert.equal(settled, false);
    const a = (await r.tryReserve())!;
    await sleep(20);
    assert.equal(settled, false, 'a reservation frees nothing');
    await r.commit(a.offset);
    await waiting;
    assert.equal(q.stats().backlog, 2);

    const ac = new AbortController();
    const aborted = q.addWait('d', { signal: ac.signal });
    const reason = new Error('give up');
    ac.abort(reason);
    await assert.rejects(aborted, (e) => e === reason);

    const closing = q.addWait('e');
    await sleep(5);
    const closed = q.close();
    await assert.rejects(closing, ClosedError);
    await closed;
    assert.deepEqual(await afterPowerCut(fs), ['b', 'c']);
  });
});

describe('enqueue stamps (checklist 14)', () => {
  it('survive reopen and requeue: the wait accumulates', async () => {
    const fs = new FaultyFileSystem();
    let q = await openQ(fs, { stampRecords: true });
    await q.add('a');
    await q.add('b');
    await q.close();
    await sleep(40);
    fs.powerCut();
    q = await openQ(fs, { stampRecords: true });
    const r = q.reader();
    assert.equal(await r.requeue(), true); // 'a' to the back, stamp kept
    await sleep(30);
    assert.equal((await r.tryTake())?.value, 'b');
    assert.ok(r.lastAgeMs >= 70, `b waited ${r.lastAgeMs} ms`);
    assert.equal((await r.tryTake())?.value, 'a');
    assert.ok(r.lastAgeMs >= 70, `a waited ${r.lastAgeMs} ms across its requeue`);
    await q.close();
  });

  it('flipping stampRecords over an existing store surfaces as a CodecError, never as wrong values', async () => {
    for (const [written, read] of [
      [true, false],
      [false, true],
    ]) {
      const fs = new FaultyFileSystem();
      let q = await DiskQueue.open(DIR, { fs, codec: codecs.json, segmentSize: SEG, stampRecords: written });
      await q.add({ name: 'x' });
      await q.add({ n: 1 });
      await q.close();
      q = await DiskQueue.open(DIR, { fs, codec: codecs.json, segmentSize: SEG, stampRecords: read });
      const r = q.reader();
      await assert.rejects(r.tryTake(), CodecError);
      assert.equal(await r.skip(), true);
      await assert.rejects(r.tryTake(), CodecError);
      await q.close();
    }
  });
});
