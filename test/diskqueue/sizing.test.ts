import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { DiskQueue, codecs, FullError, RecordTooLargeError, ClosedError } from '../../src/diskqueue/index.js';
import { HEADER_SIZE } from '../../src/diskqueue/format.js';
import { decodeHeader, frameSize, FLAG_OVERSIZED } from '../../src/diskqueue/format.js';
import { tempDir } from '../helpers/tmp.js';
import { FaultyFileSystem } from '../../src/storage/faulty.js';
import { createRequire, syncBuiltinESMExports } from 'node:module';

const segFiles = (dir: string) => readdirSync(dir).filter((f) => f.startsWith('data.')).sort();

test('segment files are named data.NNNNNNNN, preallocated to 64 + segmentSize, size rounded to 4096', async () => {
  const dir = tempDir();
  const q = await DiskQueue.open(dir, { segmentSize: 5000 });
  await q.add(new Uint8Array(10));
  assert.deepEqual(segFiles(dir), ['data.00000001']);
  assert.equal(statSync(join(dir, 'data.00000001')).size, HEADER_SIZE + 8192);
  await q.close();
  const h = decodeHeader(readFileSync(join(dir, 'data.00000001')));
  assert.ok(h.ok);
  assert.equal(h.header.segmentSize, 8192);
  assert.equal(h.header.capacity, 8192);
  assert.equal(h.header.writtenCount, 1);
  assert.equal(h.header.writeCursor, HEADER_SIZE + frameSize(10));
});

test('maxSegments: past the cap add rejects with FullError and changes nothing', async () => {
  const dir = tempDir();
  const q = await DiskQueue.open(dir, { segmentSize: 4096, maxSegments: 2 });
  const rec = new Uint8Array(1000);
  let added = 0;
  for (;;) {
    try {
      await q.add(rec);
      added++;
    } catch (err) {
      assert.ok(err instanceof FullError);
      assert.equal(err.code, 'ERR_FULL');
      break;
    }
  }
  assert.equal(added, 8, 'four 1010-byte records fit in each 4096-byte segment');
  const before = q.stats();
  await assert.rejects(q.add(rec), FullError);
  const after = q.stats();
  assert.equal(after.backlog, before.backlog);
  assert.equal(after.segments, 2);
  assert.equal(after.rejectedFull, before.rejectedFull + 1);
  assert.deepEqual(segFiles(dir), ['data.00000001', 'data.00000002']);
  await q.close();
});

test('maxBytes bounds the backlog; a record larger than maxBytes is RecordTooLargeError', async () => {
  const q = await DiskQueue.open(tempDir(), { maxBytes: 100 });
  const rec = new Uint8Array(40); // 49 framed bytes
  await q.add(rec);
  await q.add(rec);
  await assert.rejects(q.add(rec), FullError);
  await assert.rejects(q.add(new Uint8Array(200)), RecordTooLargeError);
  const s = q.stats();
  assert.equal(s.backlogBytes, 98);
  assert.equal(s.maxBytes, 100);
  // committing frees room
  await q.reader().tryTake();
  await q.add(rec);
  await q.close();
});

test('addBatch that hits a cap rejects with placed = leading items placed, each readable', async () => {
  const q = await DiskQueue.open(tempDir(), { maxBytes: 100 });
  const rec = new Uint8Array(40);
  const err = await q.addBatch([rec, rec, rec, rec]).catch((e) => e);
  assert.ok(err instanceof FullError);
  assert.equal(err.placed, 2);
  assert.equal(q.stats().backlog, 2);
  await q.close();
});

test('addWait blocks on a full queue until a commit frees room, and wakes on abort and close', async () => {
  const q = await DiskQueue.open(tempDir(), { maxBytes: 60 });
  const rec = new Uint8Array(40);
  await q.add(rec);
  let done = false;
  const waiting = q.addWait(rec).then(() => (done = true));
  await new Promise((r) => setTimeout(r, 20));
  assert.equal(done, false);
  await q.reader().tryTake();
  await waiting;
  assert.equal(q.stats().backlog, 1);

  const ac = new AbortController();
  const aborted = q.addWait(rec, { signal: ac.signal });
  ac.abort(new Error('gave up'));
  await assert.rejects(aborted, /gave up/);
  await assert.rejects(q.addWait(new Uint8Array(100)), RecordTooLargeError);

  const closing = q.addWait(rec);
  await q.close();
  await assert.rejects(closing, ClosedError);
});

test('a record larger than the segment gets an oversized segment of its own, which survives reopen', async () => {
  const dir = tempDir();
  let q = await DiskQueue.open(dir, { segmentSize: 4096 });
  await q.add(new Uint8Array([1]));
  const big = new Uint8Array(10_000).fill(7);
  await q.add(big);
  await q.add(new Uint8Array([2]));
  await q.close();
  const files = segFiles(dir);
  assert.deepEqual(files, ['data.00000001', 'data.00000002', 'data.00000003']);
  const h = decodeHeader(readFileSync(join(dir, files[1]!)));
  assert.ok(h.ok);
  assert.equal(h.header.flags & FLAG_OVERSIZED, FLAG_OVERSIZED);
  assert.equal(h.header.capacity, frameSize(10_000));
  assert.equal(h.header.segmentSize, 4096);
  q = await DiskQueue.open(dir, { segmentSize: 4096 });
  const r = q.reader();
  assert.deepEqual((await r.tryTake())?.value, new Uint8Array([1]));
  assert.deepEqual((await r.tryTake())?.value, big);
  assert.deepEqual((await r.tryTake())?.value, new Uint8Array([2]));
  await q.close();
});

test('whole segments are unlinked once every record in them is committed', async () => {
  const dir = tempDir();
  const q = await DiskQueue.open<string>(dir, { segmentSize: 4096, codec: codecs.utf8 });
  await q.addBatch(Array.from({ length: 100 }, () => 'x'.repeat(100)));
  const before = segFiles(dir).length;
  assert.ok(before >= 3);
  const r = q.reader();
  for (let i = 0; i < 50; i++) await r.tryTake();
  const mid = segFiles(dir).length;
  assert.ok(mid < before && mid > 1, `${mid} of ${before} segments left`);
  for await (const _ of r.drain()) void _;
  assert.deepEqual(segFiles(dir), [segFiles(dir).at(-1)], 'only the tail segment is kept');
  assert.equal(q.stats().segments, 1);
  assert.equal(q.stats().unreclaimed, 0);
  await q.close();
});

test('maxOpenFiles bounds open segment descriptors; closed ones reopen on demand', async () => {
  const fs = new FaultyFileSystem();
  const q = await DiskQueue.open<string>('/q', { fs, segmentSize: 4096, maxSegments: 0, maxOpenFiles: 2, codec: codecs.utf8 });
  const values = Array.from({ length: 200 }, (_, i) => `${i}`.padStart(100, '.'));
  await q.addBatch(values);
  assert.ok(q.stats().segments >= 5);
  const got: string[] = [];
  for await (const v of q.reader().drain()) got.push(v);
  assert.deepEqual(got, values);
  const opens = fs.trace.filter((t) => t.startsWith('open ')).length;
  assert.ok(opens > q.stats().segments, `segments were reopened after eviction (${opens} opens)`);
  await q.close();
});

test('reopen reads one header per segment and no records', async () => {
  const fs = new FaultyFileSystem();
  let q = await DiskQueue.open<string>('/q', { fs, segmentSize: 4096, maxSegments: 0, codec: codecs.utf8 });
  await q.addBatch(Array.from({ length: 300 }, () => 'y'.repeat(100)));
  const segments = q.stats().segments;
  await q.close();
  fs.trace.length = 0;
  q = await DiskQueue.open<string>('/q', { fs, segmentSize: 4096, maxSegments: 0, codec: codecs.utf8 });
  // One header per segment, and one small read past the tail's write cursor
  // (slack after a clean close; a torn tail to discard after an unclean one).
  const reads = fs.trace.filter((t) => t.startsWith('read '));
  assert.equal(reads.length, segments + 1);
  assert.equal(reads.filter((t) => t.endsWith(`data.${String(segments).padStart(8, '0')}`)).length, 2);
  assert.equal(q.stats().backlog, 300);
  await q.close();
});

test('maxOpenFiles never closes a descriptor under an fdatasync in flight', async () => {
  const require = createRequire(import.meta.url);
  const nodeFs = require('node:fs') as typeof import('node:fs');
  const orig = nodeFs.fdatasync;
  const target = (fd: number) => {
    try {
      return nodeFs.readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      return '(closed)';
    }
  };
  let calls = 0;
  const moved: string[] = [];
  nodeFs.fdatasync = ((fd: number, cb: (err: Error | null) => void) => {
    calls++;
    const before = target(fd);
    orig(fd, (err) => {
      const after = target(fd);
      if (after !== before) moved.push(`${before} -> ${after}`);
      cb(err);
    });
  }) as typeof nodeFs.fdatasync;
  syncBuiltinESMExports();
  try {
    const q = await DiskQueue.open(tempDir(), { segmentSize: 4096, maxOpenFiles: 2, maxSegments: 0 });
    assert.equal(await q.addBatch(Array.from({ length: 200 }, (_, i) => new Uint8Array(200).fill(i))), 200);
    await q.close();
  } finally {
    nodeFs.fdatasync = orig;
    syncBuiltinESMExports();
  }
  assert.ok(calls > 10);
  assert.deepEqual(moved, []);
});
