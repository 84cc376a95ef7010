import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DiskQueue, codecs, IOError } from '../../src/diskqueue/index.js';
import { FaultyFileSystem } from '../../src/storage/faulty.js';
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { tempDir } from '../helpers/tmp.js';
import { frameSize } from '../../src/diskqueue/format.js';

const DIR = '/q';
const count = (fs: FaultyFileSystem, step: string) => fs.trace.filter((t) => t.startsWith(step + ' ')).length;

async function drainAll(q: DiskQueue<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const v of q.reader().drain()) out.push(v);
  return out;
}

test('per-op policy: an add writes the record, syncs it, then writes and syncs the header', async () => {
  const fs = new FaultyFileSystem();
  const q = await DiskQueue.open<string>(DIR, { fs, codec: codecs.utf8 });
  await q.add('first'); // creates the segment
  fs.trace.length = 0;
  await q.add('x');
  assert.deepEqual(
    fs.trace.filter((t) => /^(write|sync):/.test(t)),
    ['write:record data.00000001', 'sync:data data.00000001', 'write:header data.00000001', 'sync:header data.00000001'],
  );
  assert.equal(q.stats().unsyncedBytes, 0);
  await q.close();
});

test('group commit: 64 concurrent adds share a handful of fsyncs and all survive a power cut', async () => {
  const fs = new FaultyFileSystem();
  const q = await DiskQueue.open<string>(DIR, { fs, codec: codecs.utf8 });
  await q.add('warm');
  fs.trace.length = 0;
  const values = Array.from({ length: 64 }, (_, i) => `v${i}`);
  await Promise.all(values.map((v) => q.add(v)));
  const dataSyncs = count(fs, 'sync:data');
  assert.ok(dataSyncs >= 1 && dataSyncs <= 2, `64 adds took ${dataSyncs} data fsyncs`);
  assert.equal(count(fs, 'sync:header'), dataSyncs);
  fs.powerCut();
  const q2 = await DiskQueue.open<string>(DIR, { fs, codec: codecs.utf8 });
  assert.deepEqual(await drainAll(q2), ['warm', ...values]);
  await q2.close();
});

test('syncEvery: N flushes once every N operations; unsyncedBytes says what a power cut would cost', async () => {
  const fs = new FaultyFileSystem();
  const q = await DiskQueue.open<string>(DIR, { fs, codec: codecs.utf8, syncEvery: 10 });
  fs.trace.length = 0;
  for (let i = 0; i < 25; i++) await q.add(`r${i}`);
  assert.equal(count(fs, 'sync:data'), 2, 'the 10th and 20th adds paid the flush');
  assert.equal(q.stats().unsyncedBytes, 5 * frameSize(3));
  fs.powerCut();
  const q2 = await DiskQueue.open<string>(DIR, { fs, codec: codecs.utf8 });
  const got = await drainAll(q2);
  assert.deepEqual(got, Array.from({ length: 20 }, (_, i) => `r${i}`), 'exactly the unsynced tail was lost');
  await q2.close();
});

test('noSync never flushes by itself; sync() and close() do', async () => {
  const fs = new FaultyFileSystem();
  const q = await DiskQueue.open<string>(DIR, { fs, codec: codecs.utf8, noSync: true });
  fs.trace.length = 0;
  for (let i = 0; i < 100; i++) await q.add('abc');
  assert.equal(count(fs, 'sync:data'), 0);
  assert.equal(q.stats().unsyncedBytes, 100 * frameSize(3));
  await q.sync();
  assert.equal(q.stats().unsyncedBytes, 0);
  assert.ok(count(fs, 'sync:data') >= 1);
  await q.add('tail');
  await q.close();
  fs.powerCut();
  const q2 = await DiskQueue.open<string>(DIR, { fs, codec: codecs.utf8 });
  assert.equal((await drainAll(q2)).length, 101);
  await q2.close();
});

test('a killed process (page cache kept) loses no resolved add under noSync', async () => {
  const fs = new FaultyFileSystem();
  const q = await DiskQueue.open<string>(DIR, { fs, codec: codecs.utf8, noSync: true });
  for (let i = 0; i < 10; i++) await q.add(`k${i}`);
  fs.processCrash();
  const q2 = await DiskQueue.open<string>(DIR, { fs, codec: codecs.utf8, noSync: true });
  assert.deepEqual(await drainAll(q2), Array.from({ length: 10 }, (_, i) => `k${i}`));
  await q2.close();
});

test('syncIntervalMs flushes an idle queue on a timer', async () => {
  const fs = new FaultyFileSystem();
  const q = await DiskQueue.open<string>(DIR, { fs, codec: codecs.utf8, syncEvery: 1000, syncIntervalMs: 10 });
  await q.add('idle');
  assert.ok(q.stats().unsyncedBytes > 0);
  const deadline = Date.now() + 2000;
  while (q.stats().unsyncedBytes > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  assert.equal(q.stats().unsyncedBytes, 0);
  await q.close();
});

test('a failed header write rejects every add whose record it rolled back, including those queued for the next flush', async () => {
  const fs = new FaultyFileSystem();
  const q = await DiskQueue.open<string>(DIR, { fs, codec: codecs.utf8 });
  await q.add('kept');
  fs.inject({ step: 'write:header', error: 'EIO' });
  const outcome = (p: Promise<void>) => p.then(() => 'resolved', (e) => (e instanceof IOError ? 'IOError' : String(e)));
  // 'b' is added while the flush carrying 'a' is between its data fsync and
  // its header write, so it waits for the next flush.
  let second: Promise<string> | undefined;
  fs.onStep = () => {
    if (fs.trace.at(-1)?.startsWith('sync:data') && !second) second = outcome(q.add('b'));
  };
  const first = outcome(q.add('a'));
  assert.equal(await first, 'IOError');
  fs.onStep = undefined;
  assert.ok(second, "'b' was added during the flush");
  assert.equal(await second, 'IOError');
  await q.add('c'); // not latched: a retry succeeds
  const r = q.reader();
  const got: string[] = [];
  for await (const v of r.drain()) got.push(v);
  assert.deepEqual(got, ['kept', 'c']);
  await q.close();
  const q2 = await DiskQueue.open<string>(DIR, { fs, codec: codecs.utf8 });
  assert.equal(q2.stats().backlog, 0);
  await q2.close();
});

test('fsyncs run on the thread pool: the queue never calls a synchronous fsync', async () => {
  const require = createRequire(import.meta.url);
  const nodeFs = require('node:fs') as typeof import('node:fs');
  const calls = { sync: 0, async: 0 };
  const orig = { fdatasyncSync: nodeFs.fdatasyncSync, fsyncSync: nodeFs.fsyncSync, fdatasync: nodeFs.fdatasync, fsync: nodeFs.fsync };
  nodeFs.fdatasyncSync = ((fd: number) => (calls.sync++, orig.fdatasyncSync(fd))) as typeof nodeFs.fdatasyncSync;
  nodeFs.fsyncSync = ((fd: number) => (calls.sync++, orig.fsyncSync(fd))) as typeof nodeFs.fsyncSync;
  nodeFs.fdatasync = ((fd: number, cb: (e: Error | null) => void) => (calls.async++, orig.fdatasync(fd, cb))) as typeof nodeFs.fdatasync;
  nodeFs.fsync = ((fd: number, cb: (e: Error | null) => void) => (calls.async++, orig.fsync(fd, cb))) as typeof nodeFs.fsync;
  syncBuiltinESMExports();
  try {
    const q = await DiskQueue.open<string>(tempDir(), { codec: codecs.utf8 });
    await Promise.all(Array.from({ length: 20 }, (_, i) => q.add(`d${i}`)));
    const r = q.reader();
    const res = await r.reserve();
    await r.commit(res.offset);
    await q.sync();
    await q.close();
  } finally {
    Object.assign(nodeFs, orig);
    syncBuiltinESMExports();
  }
  assert.equal(calls.sync, 0);
  assert.ok(calls.async >= 4, `${calls.async} fsyncs went through the thread pool`);
});
