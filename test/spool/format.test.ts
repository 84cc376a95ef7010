/**
 * The spool v1 bytes: frame, segment header and cursor encoders against
 * hand-built bytes, decoders against damage, and the committed golden
 * directory in both directions (today's code reads it, and writes it again
 * byte for byte).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  checkFrame,
  decodeCursor,
  decodeFrameHeader,
  encodeCursor,
  encodeFrame,
  encodeSegmentHeader,
  fnv64a,
  parseSegmentHeader,
} from '../../src/spool/format.js';
import { xxh64 } from '../../src/storage/xxhash.js';
import { spoolSegmentNames } from '../../src/storage/segment-names.js';
import { Spool } from '../../src/spool/index.js';
import { CURSOR_FILE } from '../../src/spool/cursor.js';
import { tempDir } from '../helpers/tmp.js';
import { GOLDEN_DIR, GOLDEN_SEGMENT_BYTES, goldenRecords, writeGolden } from './golden/v1.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

test('xxhash64 and fnv64a match their published test vectors', () => {
  assert.equal(xxh64(new Uint8Array(0)), 0xef46db3751d8e999n);
  assert.equal(fnv64a(new Uint8Array(0)), 0xcbf29ce484222325n);
  assert.equal(fnv64a(new TextEncoder().encode('a')), 0xaf63dc4c8601ec8cn);
});

test('segment header: KSPOOL then the version as u16 big-endian', () => {
  assert.equal(hex(encodeSegmentHeader()), '4b53504f4f4c0001');
  assert.deepEqual(parseSegmentHeader(encodeSegmentHeader()), { kind: 'ok', version: 1 });
  assert.deepEqual(parseSegmentHeader(encodeSegmentHeader(0x0102)), { kind: 'foreign', version: 0x0102 });
  assert.deepEqual(parseSegmentHeader(encodeSegmentHeader().subarray(0, 7)), { kind: 'damaged' });
  const bad = encodeSegmentHeader();
  bad[0] = 0x6b;
  assert.deepEqual(parseSegmentHeader(bad), { kind: 'damaged' });
});

test('frame: len u32be, then xxhash64 over len and payload together, then the payload', () => {
  const payload = new TextEncoder().encode('abc');
  const frame = encodeFrame(payload);
  assert.equal(frame.length, 15);
  assert.equal(hex(frame.subarray(0, 4)), '00000003');
  const lenAndPayload = Uint8Array.from([0, 0, 0, 3, ...payload]);
  assert.equal(new DataView(frame.buffer).getBigUint64(4, false), xxh64(lenAndPayload));
  assert.equal(hex(frame.subarray(12)), hex(payload));
  assert.deepEqual(decodeFrameHeader(frame), { length: 3, checksum: xxh64(lenAndPayload) });
  assert.equal(hex(checkFrame(frame.slice())!), hex(payload));
});

test('frame: a flipped byte anywhere (length, checksum, payload) fails the check', () => {
  const frame = encodeFrame(new Uint8Array(40).fill(7));
  for (let i = 0; i < frame.length; i++) {
    const f = frame.slice();
    f[i]! ^= 0x10;
    // A changed length no longer matches the buffer: that, too, is a failure.
    assert.equal(checkFrame(f), undefined, `byte ${i}`);
  }
  // The checksum covers the length: the same payload under a different length fails.
  const other = frame.slice();
  new DataView(other.buffer).setUint32(0, 39, false);
  assert.equal(checkFrame(other.subarray(0, 51)), undefined);
});

test('cursor: seq u64be, offset u64be, fnv64a of those 16 bytes', () => {
  const c = encodeCursor({ seq: 1, offset: 44 });
  assert.equal(hex(c.subarray(0, 16)), '0000000000000001000000000000002c');
  assert.equal(new DataView(c.buffer).getBigUint64(16, false), fnv64a(c.subarray(0, 16)));
  assert.deepEqual(decodeCursor(c), { seq: 1, offset: 44 });
  for (let i = 0; i < 24; i++) {
    const t = c.slice();
    t[i]! ^= 1;
    assert.equal(decodeCursor(t), undefined, `a flip in byte ${i} is caught`);
  }
  assert.equal(decodeCursor(c.subarray(0, 23)), undefined, 'a short cursor is torn');
});

test('segment names: 20 zero-padded digits and .seg; only the canonical spelling counts', () => {
  assert.equal(spoolSegmentNames.fileName(1), '00000000000000000001.seg');
  assert.equal(spoolSegmentNames.parse('00000000000000000042.seg'), 42);
  for (const n of ['0000000000000000001.seg', '000000000000000000001.seg', '00000000000000000000.seg', '00000000000000000001.seg.tmp', 'cursor']) {
    assert.equal(spoolSegmentNames.parse(n), undefined, n);
  }
});

test('golden v1 directory: the committed bytes drain to the expected records', async () => {
  const dir = tempDir('ferry-spool-golden-');
  cpSync(GOLDEN_DIR, dir, { recursive: true });
  const s = await Spool.open(dir, { segmentBytes: GOLDEN_SEGMENT_BYTES });
  const got: string[] = [];
  for (let p = await s.pop(); p; p = await s.pop()) {
    got.push(hex(p.data));
    await p.commit();
  }
  assert.deepEqual(got, goldenRecords().slice(2).map(hex), 'the first two were committed before the copy was taken');
  const st = s.stats();
  assert.equal(st.lostBytes + st.discardedBytes + st.foreignSegments, 0);
  await s.close();
});

test('golden v1 directory: writing the same records today gives the same bytes', async () => {
  const dir = tempDir('ferry-spool-golden-');
  await writeGolden(dir);
  const names = readdirSync(GOLDEN_DIR).sort();
  assert.deepEqual(readdirSync(dir).sort(), names);
  assert.ok(names.includes(CURSOR_FILE) && names.filter((n) => n.endsWith('.seg')).length === 3);
  for (const n of names) assert.ok(readFileSync(join(dir, n)).equals(readFileSync(join(GOLDEN_DIR, n))), `${n} drifted from the golden copy`);
});
