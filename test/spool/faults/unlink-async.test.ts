/**
 * Retired segments unlinked on the thread pool (`FileSystem.unlinkAsync`):
 * the head moves on at once; close waits for every unlink under way and the
 * directory sync after it before the lock goes; a failed unlink leaves a
 * file older than the cursor, removed at the next open without delivering
 * its records again. The unlinks are held and released by the test.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { LockedError } from '../../../src/errors.js';
import { HeldUnlinks, settled } from '../../helpers/held-unlinks.js';
import { appendAll, dec, drain, openS, range, REC_FRAME, segNumbers, segPath } from '../helpers.js';

/** Two records per segment. */
const SEGMENT_BYTES = 8 + 2 * REC_FRAME;

/** Pops and commits `n` records, returning their values. */
async function take(s: Awaited<ReturnType<typeof openS>>, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const p = (await s.pop())!;
    out.push(dec(p.data));
    await p.commit();
  }
  return out;
}

describe('retired spool segments unlinked off the event loop', () => {
  it('close waits for every unlink and a directory sync after it, holding the lock until then', async () => {
    const fs = new HeldUnlinks();
    const s = await openS(fs, { segmentBytes: SEGMENT_BYTES });
    await appendAll(s, 0, 6); // segments 1, 2 and 3
    assert.deepEqual(await take(s, 4), range(0, 4));
    const held = fs.held.splice(0);
    assert.deepEqual(held.map((h) => h.path), [segPath(1), segPath(2)]);
    assert.deepEqual(segNumbers(fs), [1, 2, 3], 'still on disk');
    const closing = s.close();
    assert.equal(await settled(closing), false, 'close waits');
    await assert.rejects(openS(fs, { segmentBytes: SEGMENT_BYTES }), LockedError);
    held[1]!.release(); // the later one first
    assert.equal(await settled(closing), false, 'close waits for the other one too');
    held[0]!.release();
    await closing;
    assert.deepEqual(segNumbers(fs), [3]);
    const after = fs.trace.slice(fs.trace.lastIndexOf(`unlink ${segPath(1).slice(segPath(1).lastIndexOf('/') + 1)}`));
    assert.ok(after.some((t) => t.startsWith('sync:dir')), `a directory sync after the last unlink: ${after.join(', ')}`);
    const again = await openS(fs, { segmentBytes: SEGMENT_BYTES });
    try {
      assert.deepEqual((await drain(again)).values, range(4, 6));
    } finally {
      for (const h of fs.held.splice(0)) h.release();
      await again.close();
    }
  });

  it('a failed unlink leaves the file, removed at the next open without delivering it again', async () => {
    const fs = new HeldUnlinks();
    const s = await openS(fs, { segmentBytes: SEGMENT_BYTES });
    await appendAll(s, 0, 6);
    assert.deepEqual(await take(s, 3), range(0, 3));
    fs.held.shift()!.fail('EIO');
    await s.close();
    assert.deepEqual(segNumbers(fs), [1, 2, 3], 'left behind');
    const again = await openS(fs, { segmentBytes: SEGMENT_BYTES });
    try {
      assert.deepEqual(segNumbers(fs), [2, 3], 'removed at open');
      assert.deepEqual((await drain(again)).values, range(3, 6));
    } finally {
      for (const h of fs.held.splice(0)) h.release();
      await again.close();
    }
  });

  it('batch commits at once while unlinks complete last-first: every segment retired once', async () => {
    const fs = new HeldUnlinks();
    const s = await openS(fs, { segmentBytes: SEGMENT_BYTES });
    try {
      await appendAll(s, 0, 20); // segments 1 to 10
      const batches = [await s.popBatch(5)];
      for (let i = 1; i < 4; i++) batches.push(await s.popBatch(5, Infinity, batches[i - 1]!.at(-1)));
      assert.deepEqual(batches.flat().map((p) => dec(p.data)), range(0, 20));
      const releasing = (async () => {
        for (let i = 0; i < 20; i++) {
          await new Promise((r) => setImmediate(r));
          for (const h of fs.held.splice(0).reverse()) h.release();
        }
      })();
      await Promise.all(batches.map((b) => s.commitBatch(b)));
      await releasing;
      assert.equal(s.stats().backlogBytes, 0);
      assert.equal(fs.trace.filter((t) => t.startsWith('unlink ')).length, 9, 'segments 1 to 9, once each');
    } finally {
      for (const h of fs.held.splice(0)) h.release();
      await s.close();
    }
    assert.deepEqual(segNumbers(fs), [10]);
    // The open retires segment 10, all of it consumed, and waits for its unlink.
    const opening = openS(fs, { segmentBytes: SEGMENT_BYTES });
    while (!(await settled(opening))) for (const h of fs.held.splice(0)) h.release();
    const again = await opening;
    try {
      assert.deepEqual(segNumbers(fs), [11]);
      assert.deepEqual((await drain(again)).values, []);
    } finally {
      await again.close();
    }
  });
});
