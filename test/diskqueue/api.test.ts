import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { DiskQueue, codecs, ClosedError, CodecError, OffsetError, FerryError, InvalidArgumentError } from '../../src/diskqueue/index.js';
import { tempDir } from '../helpers/tmp.js';

const enc = (s: string) => new TextEncoder().encode(s);

test('add then take returns records in FIFO order with the bytes codec by default', async () => {
  const q = await DiskQueue.open(tempDir());
  for (const s of ['a', 'bb', '', 'dddd']) await q.add(enc(s));
  const r = q.reader();
  const got: string[] = [];
  for (;;) {
    const v = await r.tryTake();
    if (!v) break;
    got.push(new TextDecoder().decode(v.value));
  }
  assert.deepEqual(got, ['a', 'bb', '', 'dddd']);
  const s = q.stats();
  assert.equal(s.added, 4);
  assert.equal(s.delivered, 4);
  assert.equal(s.committed, 4);
  assert.equal(s.backlog, 0);
  assert.equal(s.backlogBytes, 0);
  await q.close();
});

test('codecs: json and utf8 round-trip; a refused value is a CodecError and changes nothing', async () => {
  const q = await DiskQueue.open<{ n: number; s: string }>(tempDir(), { codec: codecs.json });
  await q.add({ n: 1, s: 'é☃' });
  await assert.rejects(q.add(undefined as never), CodecError);
  assert.equal(q.stats().added, 1);
  assert.deepEqual(await q.reader().take(), { n: 1, s: 'é☃' });
  await q.close();

  const u = await DiskQueue.open<string>(tempDir(), { codec: codecs.utf8 });
  await u.add('hello ✓');
  assert.equal((await u.reader().tryTake())?.value, 'hello ✓');
  await u.close();
});

test('a record the codec cannot decode stays at the head until skipped', async () => {
  const dir = tempDir();
  const raw = await DiskQueue.open(dir);
  await raw.add(new Uint8Array([0xff, 0xfe]));
  await raw.add(enc('"ok"'));
  await raw.close();
  const q = await DiskQueue.open<string>(dir, { codec: codecs.json });
  const r = q.reader();
  await assert.rejects(r.tryTake(), CodecError);
  await assert.rejects(r.tryTake(), CodecError);
  assert.equal(q.stats().backlog, 2);
  assert.equal(await r.skip(), true);
  assert.equal((await r.tryTake())?.value, 'ok');
  assert.equal(await r.skip(), false);
  await q.close();
});

test('a codec whose values alias its input gets a copy per record in a batch: no value of a batch overwrites another', async () => {
  const aliasing = { encode: (v: Uint8Array) => v, decode: (b: Uint8Array) => b };
  const q = await DiskQueue.open<Uint8Array>(tempDir(), { codec: aliasing });
  try {
    const text = (vs: Uint8Array[]) => vs.map((v) => Buffer.from(v).toString());
    await q.addBatch(['aaaa', 'bbbb', 'cccc', 'dddd', 'eeee', 'ffff', 'gggg', 'hhhh'].map((s) => Buffer.from(s)));
    const r = q.reader();
    assert.deepEqual(text(await r.takeBatch(3)), ['aaaa', 'bbbb', 'cccc']);
    assert.deepEqual(text((await r.reserveBatch(3)).map((x) => x.value)), ['dddd', 'eeee', 'ffff']);
    const drained: Uint8Array[] = [];
    for await (const v of r.drain({ batchSize: 2 })) drained.push(v);
    assert.deepEqual(text(drained), ['gggg', 'hhhh']);
  } finally {
    await q.close();
  }
});

test('bytes values are their own and 8-byte aligned from every read, single or batch: kept values survive later reads and a Float64Array can view them', async () => {
  const q = await DiskQueue.open(tempDir(), { segmentSize: 64 * 1024 });
  try {
    // Odd-sized records, so that a view of the segment's bytes would start at odd offsets.
    const value = (i: number) => {
      const v = new Uint8Array(8 * (1 + (i % 5)) + (i % 3 === 0 ? 0 : 8));
      new DataView(v.buffer).setFloat64(0, i + 0.5, true);
      return v;
    };
    await q.addBatch(Array.from({ length: 1200 }, (_, i) => value(i)));
    const r = q.reader();
    const kept: Uint8Array[] = [];
    for (let i = 0; i < 3; i++) kept.push((await r.tryTake())!.value);
    kept.push(...(await r.takeBatch(400)));
    kept.push(...(await r.reserveBatch(400)).map((x) => x.value));
    for await (const v of r.drain({ batchSize: 97 })) kept.push(v);
    assert.equal(kept.length, 1200);
    for (let i = 0; i < kept.length; i++) {
      const v = kept[i]!;
      assert.equal(v.byteOffset % 8, 0, `value ${i} starts at byte ${v.byteOffset} of its buffer`);
      assert.equal(new Float64Array(v.buffer, v.byteOffset, v.length / 8)[0], i + 0.5, `value ${i}`);
      assert.deepEqual(v, value(i), `value ${i}`);
    }
  } finally {
    await q.close();
  }
});

test('addBatch places every value in order and returns the count', async () => {
  const q = await DiskQueue.open<string>(tempDir(), { codec: codecs.utf8, segmentSize: 4096 });
  const values = Array.from({ length: 1000 }, (_, i) => `v${i}`);
  assert.equal(await q.addBatch(values), 1000);
  assert.ok(q.stats().segments > 1, 'a batch larger than a segment rolls segments');
  const got: string[] = [];
  for await (const v of q.reader().drain()) got.push(v);
  assert.deepEqual(got, values);
  await q.close();
});

test('reserve without commit replays after reopen; commit retires it and everything before', async () => {
  const dir = tempDir();
  let q = await DiskQueue.open<string>(dir, { codec: codecs.utf8 });
  await q.addBatch(['a', 'b', 'c', 'd']);
  let r = q.reader();
  const a = await r.reserve();
  const b = await r.reserve();
  assert.equal(a.value, 'a');
  assert.equal(b.value, 'b');
  assert.ok(b.offset > a.offset);
  assert.equal(q.stats().inFlightBytes, 2 * (1 + 1 + 8));
  await q.close();

  q = await DiskQueue.open<string>(dir, { codec: codecs.utf8 });
  r = q.reader();
  const again = await r.reserve();
  assert.equal(again.value, 'a', 'uncommitted reservations replay (at-least-once)');
  const b2 = await r.reserve();
  await r.commit(b2.offset);
  assert.equal(q.stats().committed, 2);
  await q.close();

  q = await DiskQueue.open<string>(dir, { codec: codecs.utf8 });
  const rest: string[] = [];
  for await (const v of q.reader().drain()) rest.push(v);
  assert.deepEqual(rest, ['c', 'd']);
  await q.close();
});

test('ack retires only its record; the durable commit waits for the contiguous prefix', async () => {
  const dir = tempDir();
  let q = await DiskQueue.open<string>(dir, { codec: codecs.utf8 });
  await q.addBatch(['a', 'b', 'c']);
  const r = q.reader();
  const a = await r.reserve();
  const b = await r.reserve();
  const c = await r.reserve();
  await r.ack(c.offset);
  await r.ack(b.offset);
  await r.ack(b.offset); // idempotent
  assert.equal(q.stats().committed, 0, 'nothing retires past the outstanding first record');
  await assert.rejects(r.ack(c.offset + 1n), OffsetError);
  await q.close();

  q = await DiskQueue.open<string>(dir, { codec: codecs.utf8 });
  const r2 = q.reader();
  const all: string[] = [];
  for await (const v of r2.drain()) all.push(v);
  assert.deepEqual(all, ['a', 'b', 'c'], 'the acked records replay too: their retire never became durable');
  await q.close();
  void a;
});

test('commit of an offset inside a record rounds down to that record; rewind never un-commits', async () => {
  const q = await DiskQueue.open<string>(tempDir(), { codec: codecs.utf8 });
  await q.addBatch(['aaaa', 'bbbb', 'cccc']);
  const r = q.reader();
  await r.reserve();
  const b = await r.reserve();
  await r.reserve();
  await r.commit(b.offset + 2n);
  assert.equal(q.stats().committed, 2);
  await q.rewind();
  assert.equal((await r.tryTake())?.value, 'cccc');
  assert.equal(await r.tryTake(), undefined);
  await r.commit(b.offset); // already committed: no-op
  await assert.rejects(r.commit(b.offset + 10_000n), OffsetError);
  await q.close();
});

test('tryPeek shows the head without consuming it', async () => {
  const q = await DiskQueue.open<string>(tempDir(), { codec: codecs.utf8 });
  const r = q.reader();
  assert.equal(await r.tryPeek(), undefined);
  await q.add('x');
  assert.equal((await r.tryPeek())?.value, 'x');
  assert.equal((await r.tryPeek())?.value, 'x');
  assert.equal(q.stats().delivered, 0);
  assert.equal((await r.tryTake())?.value, 'x');
  await q.close();
});

test('take waits for a record; follow yields new records until aborted', async () => {
  const q = await DiskQueue.open<string>(tempDir(), { codec: codecs.utf8 });
  const r = q.reader();
  const pending = r.take();
  setTimeout(() => void q.add('late'), 20);
  assert.equal(await pending, 'late');

  const ac = new AbortController();
  const seen: string[] = [];
  const done = (async () => {
    for await (const v of q.reader().follow({ signal: ac.signal })) {
      seen.push(v);
      if (seen.length === 3) ac.abort();
    }
  })();
  await q.addBatch(['1', '2']);
  await q.add('3');
  await done;
  assert.deepEqual(seen, ['1', '2', '3']);

  const ac2 = new AbortController();
  const blocked = q.reader().take({ signal: ac2.signal });
  ac2.abort(new Error('stop'));
  await assert.rejects(blocked, /stop/);
  await q.close();
});

test('drain yields only the records present when it began', async () => {
  const q = await DiskQueue.open<string>(tempDir(), { codec: codecs.utf8 });
  await q.addBatch(['a', 'b']);
  const got: string[] = [];
  for await (const v of q.reader().drain()) {
    got.push(v);
    if (v === 'a') await q.add('c');
  }
  assert.deepEqual(got, ['a', 'b']);
  assert.equal(q.stats().backlog, 1);
  await q.close();
});

test('requeue moves the head to the back', async () => {
  const q = await DiskQueue.open<string>(tempDir(), { codec: codecs.utf8 });
  await q.addBatch(['poison', 'a', 'b']);
  const r = q.reader();
  assert.equal(await r.requeue(), true);
  const got: string[] = [];
  for await (const v of r.drain()) got.push(v);
  assert.deepEqual(got, ['a', 'b', 'poison']);
  await q.close();
});

test('stampRecords reports how long a record waited, across reopen', async () => {
  const dir = tempDir();
  let q = await DiskQueue.open<string>(dir, { codec: codecs.utf8, stampRecords: true });
  await q.add('x');
  await q.close();
  await new Promise((r) => setTimeout(r, 30));
  q = await DiskQueue.open<string>(dir, { codec: codecs.utf8, stampRecords: true });
  const r = q.reader();
  assert.equal(await r.take(), 'x');
  assert.ok(r.lastAgeMs >= 25 && r.lastAgeMs < 60_000, `lastAgeMs ${r.lastAgeMs}`);
  await q.close();
});

test('after close every method rejects with ClosedError; blocked calls wake with it', async () => {
  const q = await DiskQueue.open<string>(tempDir(), { codec: codecs.utf8 });
  const r = q.reader();
  const blocked = r.take();
  await q.close();
  await assert.rejects(blocked, ClosedError);
  await assert.rejects(q.add('x'), ClosedError);
  await assert.rejects(q.addBatch(['x']), ClosedError);
  await assert.rejects(q.addWait('x'), ClosedError);
  await assert.rejects(q.sync(), ClosedError);
  await assert.rejects(q.rewind(), ClosedError);
  await assert.rejects(r.tryTake(), ClosedError);
  await assert.rejects(r.tryReserve(), ClosedError);
  await assert.rejects(r.tryPeek(), ClosedError);
  await assert.rejects(r.commit(0n), ClosedError);
  assert.throws(() => q.stats(), ClosedError);
  assert.throws(() => q.reader(), ClosedError);
  await q.close(); // a second close is a no-op
  const err = await r.tryTake().catch((e) => e);
  assert.ok(err instanceof FerryError);
  assert.equal(err.code, 'ERR_CLOSED');
});

test('Symbol.asyncDispose closes the queue', async () => {
  const dir = tempDir();
  {
    await using q = await DiskQueue.open(join(dir, 'q'));
    await q.add(enc('x'));
  }
  const q2 = await DiskQueue.open(join(dir, 'q'));
  assert.equal(q2.stats().backlog, 1);
  await q2.close();
});

test('bad options and arguments are InvalidArgumentError, and nothing is created', async () => {
  const dir = tempDir();
  const bad: Array<Record<string, unknown>> = [
    { segmentSize: -1 },
    { segmentSize: Number.NaN },
    { maxSegments: 1.5 },
    { maxSegments: 1 },
    { segmentsize: 4096 },
    { fs: {} },
    { noSync: 'yes' },
    { stampRecords: 1 },
    { codec: {} },
    // Two answers to when to flush, and a timer with nothing to flush (both were taken, one silently winning).
    { noSync: true, syncEvery: 10 },
    { syncIntervalMs: 100 },
    { syncEvery: 1, syncIntervalMs: 100 },
  ];
  for (const o of bad) {
    const err = await DiskQueue.open(join(dir, 'q'), o).catch((e) => e);
    assert.ok(err instanceof InvalidArgumentError, JSON.stringify(o));
    assert.equal(err.code, 'ERR_INVALID_ARGUMENT');
  }
  await assert.rejects(DiskQueue.open(''), InvalidArgumentError);
  await assert.rejects(DiskQueue.open(dir, null as never), InvalidArgumentError);
  const q = await DiskQueue.open(join(dir, 'q'));
  await assert.rejects(q.reader().ack(12 as never), InvalidArgumentError);
  await assert.rejects(q.reader().commit(-1n), InvalidArgumentError);
  await assert.rejects(q.addBatch(null as never), InvalidArgumentError);
  await assert.rejects(q.reader().ackBatch(null as never), InvalidArgumentError);
  await assert.rejects(q.reader().takeBatch(0), InvalidArgumentError);
  await assert.rejects(q.reader().reserveBatch(1.5), InvalidArgumentError);
  await assert.rejects(q.reader().drain(null as never).next(), InvalidArgumentError);
  await q.close();
});

test('option values in errors print as values: a string is quoted, not shown as the number it spells', async () => {
  const dir = join(tempDir(), 'q');
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ segmentSize: '1024' }, /segmentSize must be a non-negative integer, got "1024"$/],
    [{ maxBytes: '0' }, /got "0"$/],
    [{ noSync: 'yes' }, /noSync must be a boolean, got "yes"$/],
    [{ fileMode: '0600' }, /got "0600"$/],
  ];
  for (const [o, pattern] of cases) {
    await assert.rejects(DiskQueue.open(dir, o), (e) => e instanceof InvalidArgumentError && pattern.test(e.message), JSON.stringify(o));
  }
  const q = await DiskQueue.open(dir);
  try {
    await assert.rejects(q.reader().commit(3 as never), /offset must be a non-negative bigint from reserve\(\), got 3$/);
    await assert.rejects(q.reader().commit('3' as never), /got "3"$/);
  } finally {
    await q.close();
  }
});
