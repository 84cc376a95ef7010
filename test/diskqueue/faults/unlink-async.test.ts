/**
 * Reclaimed segments unlinked on the thread pool (`FileSystem.unlinkAsync`):
 * the segment leaves the queue at once, its file goes when the unlink
 * completes; `sync` and `close` wait for unlinks under way (close before it
 * lets the directory lock go); a failed one is counted as unreclaimed and
 * retried by the next reclaim. The unlinks are held and released by the test
 * in the order it chooses, on the in-memory file system.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { LockedError } from '../../../src/errors.js';
import { openQ, segPath, segNumbers, range } from './helpers.js';
import { HeldUnlinks, settled } from '../../helpers/held-unlinks.js';

/** Strings framed to 1,000 bytes: four fill a 4,096-byte segment. */
const rec = (i: number) => String(i).padStart(990, '.');

describe('reclaimed segments unlinked off the event loop', () => {
  it('leave the queue at once and their files once the unlink completes; sync waits for it', async () => {
    const fs = new HeldUnlinks();
    const q = await openQ(fs);
    try {
      await q.addBatch(range(0, 9).map(rec)); // segments 1 and 2 full, one record in 3
      const r = q.reader();
      for (let i = 0; i < 4; i++) assert.equal((await r.tryTake())?.value, rec(i));
      assert.deepEqual(fs.held.map((h) => h.path), [segPath(1)]);
      assert.equal(q.stats().segments, 2, 'out of the queue');
      assert.equal(q.stats().unreclaimed, 0, 'under way is not unreclaimed');
      assert.deepEqual(segNumbers(fs), [1, 2, 3], 'still on disk');
      const sync = q.sync();
      assert.equal(await settled(sync), false, 'sync waits for the unlink');
      fs.held.shift()!.release();
      await sync;
      assert.deepEqual(segNumbers(fs), [2, 3]);
      const tail = fs.trace.slice(fs.trace.findIndex((t) => t.startsWith('unlink data.00000001')));
      assert.ok(tail.some((t) => t.startsWith('sync:dir')), `a directory sync after the unlink: ${tail.join(', ')}`);
    } finally {
      for (const h of fs.held.splice(0)) h.release();
      await q.close();
    }
  });

  it('a failed unlink is counted as unreclaimed and retried by the next reclaim', async () => {
    const fs = new HeldUnlinks();
    const q = await openQ(fs);
    try {
      await q.addBatch(range(0, 9).map(rec));
      const r = q.reader();
      for (let i = 0; i < 4; i++) await r.tryTake();
      fs.held.shift()!.fail('EIO');
      await new Promise((res) => setImmediate(res));
      assert.equal(q.stats().unreclaimed, 1);
      for (let i = 4; i < 8; i++) await r.tryTake(); // segment 2 done: reclaim runs again
      assert.deepEqual(fs.held.map((h) => h.path).sort(), [segPath(1), segPath(2)], 'the failed one is tried again');
      assert.equal(q.stats().unreclaimed, 0);
      for (const h of fs.held.splice(0)) h.release();
      await q.sync();
      assert.deepEqual(segNumbers(fs), [3]);
    } finally {
      for (const h of fs.held.splice(0)) h.release();
      await q.close();
    }
  });

  it('an unlink that finds the file gone is done, not unreclaimed', async () => {
    const fs = new HeldUnlinks();
    const q = await openQ(fs);
    try {
      await q.addBatch(range(0, 5).map(rec));
      const r = q.reader();
      for (let i = 0; i < 4; i++) await r.tryTake();
      fs.held.shift()!.fail('ENOENT');
      await q.sync();
      assert.equal(q.stats().unreclaimed, 0);
    } finally {
      await q.close();
    }
  });

  it('close waits for unlinks under way, holding the lock until they complete', async () => {
    const fs = new HeldUnlinks();
    const q = await openQ(fs);
    await q.addBatch(range(0, 5).map(rec));
    const r = q.reader();
    for (let i = 0; i < 4; i++) await r.tryTake();
    const closing = q.close();
    assert.equal(await settled(closing), false, 'close waits');
    await assert.rejects(openQ(fs), LockedError, 'the lock is still held');
    fs.held.shift()!.release();
    await closing;
    assert.deepEqual(segNumbers(fs), [2]);
    const again = await openQ(fs);
    assert.equal((await again.reader().tryTake())?.value, rec(4));
    await again.close();
  });

  it('readers at once, unlinks completing in reverse order: every record once, every emptied file gone', async () => {
    const fs = new HeldUnlinks();
    const q = await openQ(fs);
    try {
      const n = 4 * 6 + 1; // six full segments and one record in the seventh
      await q.addBatch(range(0, n).map(rec));
      const readers = [q.reader(), q.reader(), q.reader()];
      const got = (
        await Promise.all(
          readers.map(async (r) => {
            const mine: string[] = [];
            for (let v = await r.tryReserve(); v; v = await r.tryReserve()) {
              mine.push(v.value);
              await r.ack(v.offset);
            }
            return mine;
          }),
        )
      ).flat();
      assert.deepEqual(got.sort(), range(0, n).map(rec).sort());
      assert.deepEqual(fs.held.map((h) => h.path).sort(), range(1, 7).map(segPath).sort());
      const sync = q.sync();
      for (const h of fs.held.splice(0).reverse()) {
        assert.equal(await settled(sync), false, 'sync waits for every unlink');
        h.release();
      }
      await sync;
      assert.deepEqual(segNumbers(fs), [7]);
      assert.equal(q.stats().unreclaimed, 0);
      assert.equal(fs.trace.filter((t) => t.startsWith('unlink ')).length, 6, 'each file unlinked once');
    } finally {
      for (const h of fs.held.splice(0)) h.release();
      await q.close();
    }
  });
});
