/**
 * `ferry push --batch N`: each `addBatch` gets at most N records, however
 * many one read of the input holds. A 256 KiB read of short lines once went
 * to the queue whole, so `--batch 100` over 1,000 lines made 2 syncs, not 10.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Batcher, pushFailure } from '../../src/cli/push.js';
import { GroupLostError } from '../../src/errors.js';
import { BATCH_BYTES } from '../../src/cli/common.js';

const lines = (n: number, size = 8) => Array.from({ length: n }, (_, i) => Buffer.alloc(size, 97 + (i % 26)));

/** A batcher whose store records each batch's records and byte count. */
function recording(limit: number) {
  const batches: { records: Buffer[]; bytes: number }[] = [];
  const b = new Batcher(limit, async (records, bytes) => {
    batches.push({ records, bytes });
  });
  return { b, batches };
}

test('one read of 1,000 records with a limit of 100 is stored as 10 batches of 100, in order', async () => {
  const { b, batches } = recording(100);
  const input = lines(1000);
  await b.add(input);
  await b.flush();
  assert.deepEqual(
    batches.map((x) => x.records.length),
    Array(10).fill(100),
  );
  assert.deepEqual(batches.flatMap((x) => x.records), input, 'every record, once, in order');
  assert.ok(batches.every((x) => x.bytes === 800));
});

test('records held across reads fill a batch together; flush stores the remainder', async () => {
  const { b, batches } = recording(4);
  const input = lines(11);
  await b.add(input.slice(0, 3));
  assert.equal(batches.length, 0, 'three records do not fill a batch of 4');
  await b.add(input.slice(3, 9));
  assert.deepEqual(batches.map((x) => x.records.length), [4, 4]);
  await b.add(input.slice(9));
  await b.flush();
  await b.flush();
  assert.deepEqual(batches.map((x) => x.records.length), [4, 4, 3], 'a second flush with nothing held stores nothing');
  assert.deepEqual(batches.flatMap((x) => x.records), input);
});

test('a batch also ends at BATCH_BYTES, whatever the limit', async () => {
  const { b, batches } = recording(1_000_000);
  const size = 1024 * 1024;
  const input = lines(BATCH_BYTES / size + 2, size);
  await b.add(input);
  await b.flush();
  assert.deepEqual(batches.map((x) => x.records.length), [BATCH_BYTES / size, 2]);
  assert.equal(batches[0]!.bytes, BATCH_BYTES);
});

test('a store that fails stops the add: later records are not stored', async () => {
  let calls = 0;
  const b = new Batcher(2, async () => {
    calls++;
    if (calls === 2) throw new Error('disk full');
  });
  await assert.rejects(b.add(lines(10)), /disk full/);
  assert.equal(calls, 2, 'the add stopped at the failing batch');
});

test('adds made at once: each record is stored once, batches go to the store one at a time, in the order they filled', async () => {
  const order: Buffer[] = [];
  let running = 0;
  let most = 0;
  const b = new Batcher(3, async (records) => {
    running++;
    most = Math.max(most, running);
    await new Promise((r) => setImmediate(r));
    order.push(...records);
    running--;
  });
  const a = lines(10, 4).map((x, i) => Buffer.from(`a${i}`));
  const c = lines(10, 4).map((x, i) => Buffer.from(`c${i}`));
  await Promise.all([b.add(a), b.add(c), b.flush()]);
  await b.flush();
  assert.equal(most, 1, 'one store at a time');
  assert.equal(order.length, 20);
  assert.deepEqual(new Set(order.map(String)).size, 20, 'no record twice');
  assert.deepEqual(order.filter((x) => x[0] === 97), a, "each caller's records in its order");
  assert.deepEqual(order.filter((x) => x[0] === 99), c);
});

test('after a failed store, a later flush rejects and stores nothing more', async () => {
  const seen: number[] = [];
  const b = new Batcher(2, async (records) => {
    seen.push(records.length);
    if (seen.length === 1) throw new Error('disk full');
  });
  await assert.rejects(b.add(lines(2)), /disk full/);
  await assert.rejects(b.add(lines(1)).then(() => b.flush()), /disk full/);
  assert.deepEqual(seen, [2]);
});

test("a lost spool group's message gives the cause and the counts, not the library's advice to call sync()", () => {
  const enospc = Object.assign(new Error("ENOSPC: no space left on device, write '/q/s'"), { code: 'ENOSPC', syscall: 'write' });
  const err = new GroupLostError('an appendNoSync group was lost (ENOSPC) and sync() has not reported it yet: nothing was placed; call sync() (it rejects with the loss), then re-append the group', {
    cause: enospc,
  });
  const msg = pushFailure(err, 'in.txt', 25, 7).message;
  assert.equal(
    msg,
    'a write to the spool failed: no space left on device (ENOSPC) (ERR_GROUP_LOST); 25 records before it were stored, and up to 7 after them may be too (a failed write or sync cut part of their batch: a rerun from there may store some twice)',
  );
});
