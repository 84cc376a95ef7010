/**
 * Reclaimed segments unlinked on the thread pool (`FileSystem.unlinkAsync`),
 * with the unlinks held and released by the test, on the in-memory file
 * system:
 * - the segment leaves the queue at once; its file goes when the unlink completes;
 * - its last commits are in its header before that, so a kill before the
 *   unlink runs brings back a file the next open reclaims: no acked record
 *   is delivered again;
 * - a flush waits for the unlinks under way before it syncs the directory:
 *   under the per-operation policy the commit that emptied a segment
 *   resolves once the removal is durable, and `sync` covers removals;
 * - close waits for them before the lock goes; a failed one is counted as
 *   unreclaimed and retried by the next reclaim, and the next flush syncs
 *   the header reclaim wrote into its file.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { LockedError } from '../../../src/errors.js';
import { DiskQueue, codecs } from '../../../src/diskqueue/index.js';
import { nodeFileSystem, type FileHandle, type FileSystem } from '../../../src/storage/fs.js';
import { readdirSync } from 'node:fs';
import { tempDir } from '../../helpers/tmp.js';
import { HeldUnlinks, settled } from '../../helpers/held-unlinks.js';
import { openQ, segPath, segNumbers, range, drainAll } from './helpers.js';

/** Strings framed to 1,000 bytes: four fill a 4,096-byte segment. */
const rec = (i: number) => String(i).padStart(990, '.');

/** Releases every unlink held now and later, until the returned stop is called. */
function releaseAll(fs: HeldUnlinks): () => void {
  let on = true;
  const tick = () => {
    for (const h of fs.held.splice(0)) h.release();
    if (on) setImmediate(tick);
  };
  tick();
  return () => {
    on = false;
    for (const h of fs.held.splice(0)) h.release();
  };
}

/** A `noSync` queue holding records 0 to n - 1, the four of segment 1 taken (so its unlink is held). */
async function segmentOneTaken(fs: HeldUnlinks, n: number) {
  const q = await openQ(fs, { noSync: true });
  await q.addBatch(range(0, n).map(rec));
  const r = q.reader();
  for (let i = 0; i < 4; i++) await r.tryTake();
  return { q, r };
}

/**
 * On a per-operation queue: adds records 0–5, takes 0–2, and starts the take
 * of 3, which empties segment 1; returns it (wrapped, so awaiting this does
 * not await it), still waiting for the unlink.
 */
async function fourthTakeWaiting(q: DiskQueue<string>): Promise<{ fourth: Promise<{ value: string } | undefined> }> {
  await q.addBatch(range(0, 6).map(rec));
  const r = q.reader();
  for (let i = 0; i < 3; i++) await r.tryTake();
  const fourth = r.tryTake();
  assert.equal(await settled(fourth), false, 'waits for the unlink');
  return { fourth };
}

describe('reclaimed DiskQueue segments unlinked off the event loop', () => {
  it('noSync: the segment leaves at once, its file when the unlink completes; sync waits for it', async () => {
    const fs = new HeldUnlinks();
    const q = await openQ(fs, { noSync: true });
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
      const after = fs.trace.slice(fs.trace.indexOf('unlink data.00000001'));
      assert.ok(after.some((t) => t.startsWith('sync:dir')), `a directory sync after the unlink: ${after.join(', ')}`);
    } finally {
      for (const h of fs.held.splice(0)) h.release();
      await q.close();
    }
  });

  it('a kill before the unlink runs: the next open reclaims the file, and no acked record comes back', async () => {
    for (const readers of [1, 3]) {
      const fs = new HeldUnlinks();
      const q = await openQ(fs, { noSync: true });
      await q.addBatch(range(0, 10).map(rec));
      // Reserved by several readers and acked out of order: the commit moves across segment 1 in one step.
      const rs = Array.from({ length: readers }, () => q.reader());
      const got: Array<{ r: (typeof rs)[0]; offset: bigint; value: string }> = [];
      for (let i = 0; i < 6; i++) {
        const r = rs[i % readers]!;
        const v = (await r.tryReserve())!;
        got.push({ r, offset: v.offset, value: v.value });
      }
      for (const g of got.reverse()) await g.r.ack(g.offset);
      assert.deepEqual(fs.held.map((h) => h.path), [segPath(1)], 'its unlink is under way');
      fs.held.splice(0); // never runs: the process is killed first
      fs.processCrash();
      const stop = releaseAll(fs); // the reopen's own unlinks
      const again = await openQ(fs, { noSync: true });
      try {
        const rest = await drainAll(again.reader());
        assert.deepEqual(rest.values, range(6, 10).map(rec), `${readers} reader(s)`);
        assert.deepEqual(rest.errors, []);
      } finally {
        await again.close();
        stop();
      }
      assert.ok(!segNumbers(fs).includes(1), 'the open reclaimed it');
    }
  });

  it('per-operation policy: the commit that empties a segment resolves once its removal is durable', async () => {
    const fs = new HeldUnlinks();
    const q = await openQ(fs);
    try {
      const { fourth } = await fourthTakeWaiting(q);
      assert.deepEqual(fs.held.map((h) => h.path), [segPath(1)]);
      fs.held.shift()!.release();
      assert.equal((await fourth)?.value, rec(3));
      const after = fs.trace.slice(fs.trace.indexOf('unlink data.00000001'));
      assert.ok(after.some((t) => t.startsWith('sync:dir')), `the directory was synced after the unlink: ${after.join(', ')}`);
      // What a power cut now leaves: segment 1 is gone for good.
      assert.ok(!segNumbers(fs.crashImage()).includes(1));
    } finally {
      for (const h of fs.held.splice(0)) h.release();
      await q.close();
    }
  });

  it('a failed unlink leaves a file whose last header the commit synced: a power cut brings back none of its records', async () => {
    const fs = new HeldUnlinks();
    const q = await openQ(fs);
    try {
      const { fourth } = await fourthTakeWaiting(q);
      fs.held.shift()!.fail('EIO');
      assert.equal((await fourth)?.value, rec(3));
      assert.equal(q.stats().unreclaimed, 1);
      const image = fs.crashImage();
      assert.deepEqual(segNumbers(image), [1, 2], 'the file stays');
      const again = await openQ(image);
      try {
        assert.deepEqual(await drainAll(again.reader()), { values: [rec(4), rec(5)], errors: [] });
      } finally {
        await again.close();
      }
    } finally {
      for (const h of fs.held.splice(0)) h.release();
      await q.close();
    }
  });

  it('a failed unlink is counted as unreclaimed and retried by the next reclaim', async () => {
    const fs = new HeldUnlinks();
    const { q, r } = await segmentOneTaken(fs, 9);
    try {
      fs.held.shift()!.fail('EIO');
      await new Promise((res) => setImmediate(res));
      assert.equal(q.stats().unreclaimed, 1);
      for (let i = 4; i < 8; i++) await r.tryTake(); // segment 2 done: reclaim runs again
      assert.deepEqual(segNumbers(fs), [2, 3], 'the failed one went synchronously');
      assert.equal(q.stats().unreclaimed, 0);
      fs.held.shift()!.release();
      await q.sync();
      assert.deepEqual(segNumbers(fs), [3]);
    } finally {
      for (const h of fs.held.splice(0)) h.release();
      await q.close();
    }
  });

  it('noSync: a sync waits for the unlinks under way when it was called, not for ones readers start later', async () => {
    const fs = new HeldUnlinks();
    const { q, r } = await segmentOneTaken(fs, 9);
    try {
      const sync = q.sync();
      for (let i = 4; i < 8; i++) await r.tryTake(); // empties segment 2 meanwhile
      assert.deepEqual(fs.held.map((h) => h.path), [segPath(1), segPath(2)]);
      fs.held.shift()!.release();
      // Segment 2's unlink is still held: the sync must not wait for it (the deadline only catches that hang).
      let timer: NodeJS.Timeout | undefined;
      const hung = new Promise<'hung'>((res) => (timer = setTimeout(() => res('hung'), 10_000)));
      assert.equal(await Promise.race([sync.then(() => 'synced'), hung]), 'synced');
      clearTimeout(timer);
      assert.deepEqual(segNumbers(fs), [2, 3]);
    } finally {
      for (const h of fs.held.splice(0)) h.release();
      await q.close();
    }
  });

  it('maxOpenFiles 1: a segment reclaimed while a flush syncs headers one at a time is skipped, not reopened (no ENOENT latch)', async () => {
    const dir = tempDir();
    let armed = false;
    let reached!: () => void;
    const atHold = new Promise<void>((res) => (reached = res));
    let release!: () => void;
    const gate = new Promise<void>((res) => (release = res));
    // The header fdatasync of segment 3 waits for the test, once.
    const fs: FileSystem = Object.assign(Object.create(nodeFileSystem) as FileSystem, {
      open(path: string, mode: Parameters<FileSystem['open']>[1], perm?: number): FileHandle {
        const fh = nodeFileSystem.open(path, mode, perm);
        return Object.assign(Object.create(fh) as FileHandle, {
          datasync: async (step: Parameters<FileHandle['datasync']>[0]) => {
            if (armed && step === 'header' && path.endsWith('data.00000003')) {
              armed = false;
              reached();
              await gate;
            }
            return fh.datasync(step);
          },
        });
      },
    });
    const q = await DiskQueue.open<string>(dir, { fs, segmentSize: 4096, maxOpenFiles: 1, codec: codecs.utf8 });
    try {
      await q.addBatch(range(0, 8).map(rec)); // segments 1 and 2 full
      const r = q.reader();
      for (let i = 0; i < 6; i++) await r.tryTake(); // segment 1 reclaimed, half of 2 taken
      armed = true;
      const added = q.add(rec(8)); // segment 3, in the next flush
      const next = r.tryTake(); // a commit in segment 2, in the same flush
      await atHold; // that flush syncs headers one at a time and holds at segment 3's
      const last = r.tryTake(); // empties segment 2: reclaimed before the flush gets to its header
      release();
      const settledAll = await Promise.allSettled([added, next, last]);
      assert.deepEqual(settledAll.map((x) => (x.status === 'rejected' ? String(x.reason) : 'ok')), ['ok', 'ok', 'ok']);
      await q.add(rec(9)); // not latched
      assert.deepEqual((await r.takeBatch(10)), [rec(8), rec(9)]);
    } finally {
      release();
      await q.close();
    }
    assert.deepEqual(readdirSync(dir).filter((n) => n.startsWith('data.')), ['data.00000003']);
  });

  it('sync and close at once while an unlink is held: both wait for it, and both resolve once it completes', async () => {
    const fs = new HeldUnlinks();
    const { q } = await segmentOneTaken(fs, 5);
    const both = Promise.all([q.sync(), q.close()]);
    assert.equal(await settled(both), false, 'both wait');
    fs.held.shift()!.release();
    await both;
    assert.deepEqual(segNumbers(fs), [2]);
    const after = fs.trace.slice(fs.trace.indexOf('unlink data.00000001'));
    assert.ok(after.some((t) => t.startsWith('sync:dir')), `a directory sync after the unlink: ${after.join(', ')}`);
  });

  it('close waits for unlinks under way, holding the lock until they complete', async () => {
    const fs = new HeldUnlinks();
    const q = await openQ(fs, { noSync: true });
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
    for (const noSync of [true, false]) {
      const fs = new HeldUnlinks();
      const q = await openQ(fs, { noSync });
      // Under the per-operation policy a commit waits for the unlinks: release them as they come.
      const stop = noSync ? () => {} : releaseAll(fs);
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
        const sync = q.sync();
        for (const h of fs.held.splice(0).reverse()) {
          assert.equal(await settled(sync), false, 'sync waits for every unlink');
          h.release();
        }
        await sync;
        assert.deepEqual(segNumbers(fs), [7], `noSync ${noSync}`);
        assert.equal(q.stats().unreclaimed, 0);
        assert.equal(fs.trace.filter((t) => t.startsWith('unlink ')).length, 6, 'each file unlinked once');
      } finally {
        stop();
        for (const h of fs.held.splice(0)) h.release();
        await q.close();
      }
    }
  });
});
