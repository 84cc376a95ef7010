/**
 * How an ack finds its reservation: the ledger is searched in log order (no
 * map per reservation), including the acked records a rewind set aside. An
 * ack must find every reservation still out, in any order, across segments;
 * an ack of a record acked before a rewind is a no-op; an offset never
 * reserved is an OffsetError that acknowledges nothing.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DiskQueue, codecs, OffsetError } from '../../src/diskqueue/index.js';
import { tempDir } from '../helpers/tmp.js';

test('acks out of order across segments find their reservations; a bad offset in a batch acknowledges none', async () => {
  // The smallest segments (4 KiB): 40 records of 200 bytes span three files.
  const q = await DiskQueue.open<string>(tempDir(), { codec: codecs.utf8, segmentSize: 4096 });
  try {
    const values = Array.from({ length: 40 }, (_, i) => `r${String(i).padStart(3, '0')}`.padEnd(200, '.'));
    await q.addBatch(values);
    const r = q.reader();
    const got = await r.reserveBatch(40);
    assert.deepEqual(got.map((g) => g.value), values.slice(0, got.length));
    const rest = [];
    for (let more = await r.reserveBatch(40); more.length; more = await r.reserveBatch(40)) rest.push(...more);
    const all = [...got, ...rest];
    assert.equal(all.length, 40);
    assert.ok(new Set(all.map((g) => g.offset >> 48n)).size > 1, 'the records span segments');
    // One unknown offset: nothing in the batch is acknowledged.
    await assert.rejects(r.ackBatch([all[5]!.offset, all[39]!.offset + 1n]), OffsetError);
    assert.equal(q.stats().committed, 0);
    // Every other record, newest first, then the rest in reading order.
    const odd = all.filter((_, i) => i % 2 === 1).reverse();
    await r.ackBatch(odd.map((g) => g.offset));
    assert.equal(q.stats().committed, 0, 'the oldest reservation is still out');
    for (const g of all.filter((_, i) => i % 2 === 0)) await r.ack(g.offset);
    assert.equal(q.stats().committed, 40);
    // Committed offsets are acknowledged again harmlessly.
    await r.ackBatch(all.map((g) => g.offset));
  } finally {
    await q.close();
  }
});

test('after a rewind, an ack of a record acked before it is a no-op, and the returned records are found again', async () => {
  const q = await DiskQueue.open<string>(tempDir(), { codec: codecs.utf8 });
  try {
    await q.addBatch(['a', 'b', 'c', 'd', 'e']);
    const r = q.reader();
    const first = await r.reserveBatch(5);
    await r.ackBatch([first[1]!.offset, first[3]!.offset]);
    await q.rewind();
    // b and d were acked: set aside, still known to an ack.
    await r.ack(first[1]!.offset);
    await r.ackBatch([first[3]!.offset]);
    const again = await r.reserveBatch(5);
    assert.deepEqual(again.map((g) => g.value), ['a', 'c', 'e']);
    await assert.rejects(r.ack(first[4]!.offset + 1n), OffsetError);
    await r.ackBatch(again.map((g) => g.offset).reverse());
    assert.equal(q.stats().committed, 5);
    assert.equal(await r.tryTake(), undefined);
  } finally {
    await q.close();
  }
});
