import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DiskQueue } from '../../src/diskqueue/index.js';
import {
  decodeHeader,
  encodeHeader,
  encodeRecord,
  frameRecord,
  checksumMatches,
  frameSize,
  normalizeSegmentSize,
  HEADER_SIZE,
  type SegmentHeader,
} from '../../src/diskqueue/format.js';
import { xxh64 } from '../../src/storage/xxhash.js';
import { segmentFileName, parseSegmentFileName } from '../../src/storage/segment-names.js';
import { GOLDEN_DIR, GOLDEN_SEGMENT_SIZE, goldenRecords, writeGolden } from './golden/v1.js';
import { tempDir } from '../helpers/tmp.js';
import { FaultyFileSystem } from '../../src/storage/faulty.js';
import { walkRecords } from '../../src/diskqueue/segment.js';

test('xxhash64 (seed 0) matches the reference values', () => {
  assert.equal(xxh64(new Uint8Array(0)), 0xef46db3751d8e999n);
  assert.equal(xxh64(new TextEncoder().encode('abc')), 0x44bc2cf5ad770999n);
});

test('header: every field at its documented offset, little-endian, checksummed', () => {
  const h: SegmentHeader = {
    commitCursor: 0x0102,
    writeCursor: 0x0304,
    writtenCount: 5,
    committedCount: 2,
    version: 1,
    flags: 1,
    capacity: 0x1_0000_0000 + 7,
    segmentSize: 2 ** 40 + 4096,
  };
  const b = encodeHeader(h);
  assert.equal(b.length, 64);
  assert.equal(new TextDecoder().decode(b.subarray(0, 8)), 'WALGOseg');
  const v = new DataView(b.buffer);
  assert.equal(v.getBigUint64(8, true), 0x0102n);
  assert.equal(v.getBigUint64(16, true), 0x0304n);
  assert.equal(v.getBigUint64(24, true), 5n);
  assert.equal(v.getBigUint64(32, true), 2n);
  assert.equal(b[40], 1);
  assert.equal(b[41], 1);
  assert.equal(v.getBigUint64(42, true), 0x1_0000_0007n);
  assert.deepEqual([...b.subarray(50, 56)], [0x00, 0x10, 0, 0, 0, 0x01]);
  assert.equal(v.getBigUint64(56, true), xxh64(b.subarray(0, 56)));
  assert.deepEqual(decodeHeader(b), { ok: true, header: h });
});

test('header faults: short, all-zero, magic, version, checksum', () => {
  const good = encodeHeader({ commitCursor: 64, writeCursor: 64, writtenCount: 0, committedCount: 0, version: 1, flags: 0, capacity: 4096, segmentSize: 4096 });
  assert.equal((decodeHeader(good.subarray(0, 63)) as { fault: string }).fault, 'short');
  assert.equal((decodeHeader(new Uint8Array(64)) as { fault: string }).fault, 'zero');
  const magic = good.slice();
  magic[0] = 0x58;
  assert.equal((decodeHeader(magic) as { fault: string }).fault, 'magic');
  const flipped = good.slice();
  flipped[40] = 2;
  assert.equal((decodeHeader(flipped) as { fault: string }).fault, 'checksum', 'a damaged version byte is damage');
  const future = encodeHeader({ ...(decodeHeader(good) as { header: SegmentHeader }).header, version: 2 });
  assert.equal((decodeHeader(future) as { fault: string }).fault, 'version');
  const torn = good.slice();
  torn[20] ^= 1;
  const res = decodeHeader(torn);
  assert.equal(res.ok, false);
  assert.equal((res as { fault: string }).fault, 'checksum');
});

test('record: uvarint length, payload, xxhash64 of the payload little-endian', () => {
  const payload = new Uint8Array(300).fill(9);
  const out = new Uint8Array(400);
  const n = encodeRecord(payload, out, 5);
  assert.equal(n, 2 + 300 + 8);
  assert.equal(frameSize(300), n);
  assert.deepEqual([...out.subarray(5, 7)], [0xac, 0x02]); // 300 as uvarint
  assert.equal(new DataView(out.buffer).getBigUint64(5 + 2 + 300, true), xxh64(payload));
  const f = frameRecord(out, 5, 5 + n, 5 + n);
  assert.ok(typeof f === 'object');
  assert.deepEqual(f, { payloadStart: 7, payloadEnd: 307, end: 5 + n });
  assert.ok(checksumMatches(out, f));
  assert.equal(frameRecord(out, 5, 5 + n - 1, 5 + n), 'need');
  assert.equal(frameRecord(out, 5, 5 + n, 5 + n - 1), 'length');
});

test('segment size: floor 4 KiB, multiple of 4096, cap 2^48 - 4096; names are data.%08d', () => {
  assert.equal(normalizeSegmentSize(1), 4096);
  assert.equal(normalizeSegmentSize(4097), 8192);
  assert.equal(normalizeSegmentSize(8 << 20), 8 << 20);
  assert.equal(normalizeSegmentSize(2 ** 50), 2 ** 48 - 4096);
  assert.equal(segmentFileName(1), 'data.00000001');
  assert.equal(segmentFileName(123456789), 'data.123456789');
  assert.equal(parseSegmentFileName('data.00000042'), 42);
  assert.equal(parseSegmentFileName('data.1'), undefined);
  assert.equal(parseSegmentFileName('data.00000001.tmp'), undefined);
  assert.equal(parseSegmentFileName('data.000000001'), undefined, 'a second spelling of segment 1 is not a segment');
  assert.equal(parseSegmentFileName('data.123456789'), 123456789);
});

test('golden v1 directory: the committed bytes drain to the expected records', async () => {
  const dir = tempDir();
  cpSync(GOLDEN_DIR, dir, { recursive: true });
  const q = await DiskQueue.open(dir, { segmentSize: GOLDEN_SEGMENT_SIZE });
  const got: Uint8Array[] = [];
  for await (const v of q.reader().drain()) got.push(v);
  assert.deepEqual(got, goldenRecords().slice(2), 'the first two were committed before the golden copy was taken');
  assert.equal(q.stats().corruptions, 0);
  await q.close();
});

test('golden v1 directory: writing the same records today gives the same bytes', async () => {
  const dir = tempDir();
  await writeGolden(dir);
  const names = readdirSync(GOLDEN_DIR).sort();
  assert.deepEqual(readdirSync(dir).sort(), names);
  for (const n of names) {
    assert.ok(readFileSync(join(dir, n)).equals(readFileSync(join(GOLDEN_DIR, n))), `${n} drifted from the golden copy`);
  }
  const h = decodeHeader(readFileSync(join(GOLDEN_DIR, names[0]!)));
  assert.ok(h.ok);
  assert.equal(h.header.commitCursor, HEADER_SIZE + frameSize(0) + frameSize(12));
  assert.equal(h.header.committedCount, 2);
});

test('walkRecords stops at the end of the file even when its limit lies beyond it', { timeout: 10_000 }, () => {
  const fs = new FaultyFileSystem();
  fs.mkdirp('/w');
  const rec = new Uint8Array(2 * frameSize(300));
  const n1 = encodeRecord(new Uint8Array(300).fill(1), rec, 0);
  encodeRecord(new Uint8Array(300).fill(2), rec, n1);
  const file = new Uint8Array(HEADER_SIZE + n1 + 100); // cut inside the second record
  file.set(rec.subarray(0, n1 + 100), HEADER_SIZE);
  fs.writeFile('/w/f', file);
  const walk = walkRecords(fs.open('/w/f', 'r'), HEADER_SIZE, 1 << 20);
  assert.deepEqual(walk, { end: HEADER_SIZE + n1, count: 1, damaged: 0 });
});
