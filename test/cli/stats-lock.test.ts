import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { DiskQueue } from '../../src/diskqueue/index.js';
import { ferry, scratch, hasStackTrace } from './helpers.js';

const tmp = await scratch();
after(() => tmp.cleanup());

/** Framed size of a payload of `len` < 128 bytes: 1-byte length, payload, 8-byte checksum. */
const framed = (len: number) => 1 + len + 8;

test('stats --json prints every field as one JSON line', async () => {
  const q = join(tmp.dir, 'stats');
  await ferry(['push', q, '--segment-size', '4096', '-q'], { input: 'a\nbb\n\n' });
  const res = await ferry(['stats', q, '--json']);
  assert.equal(res.code, 0, res.stderr);
  const text = res.stdout.toString();
  assert.equal(text.split('\n').length, 2, 'one line and its newline');
  const s = JSON.parse(text);
  assert.deepEqual(Object.keys(s).sort(), [
    'added', 'backlog', 'backlogBytes', 'committed', 'corruptions', 'delivered', 'discardedBytes', 'diskBytes',
    'foreignBytes', 'foreignSegments', 'inFlightBytes', 'lostBytes', 'lostRecords', 'lostSegments', 'maxBytes',
    'maxSegments', 'rejectedFull', 'segments', 'unreclaimed', 'unsyncedBytes',
  ]);
  assert.equal(s.maxSegments, 32);
  assert.equal(s.discardedBytes, 0);
  assert.equal(s.foreignBytes, 0);
  assert.equal(s.backlog, 3);
  assert.equal(s.backlogBytes, framed(1) + framed(2) + framed(0));
  assert.equal(s.segments, 1);
  assert.equal(s.diskBytes, 64 + 4096);
  assert.equal(s.corruptions, 0);
  assert.equal(s.unsyncedBytes, 0);
});

test('stats prints an aligned table by default', async () => {
  const q = join(tmp.dir, 'stats');
  const res = await ferry(['stats', q]);
  assert.equal(res.code, 0);
  const lines = res.stdout.toString().trimEnd().split('\n');
  assert.equal(lines.length, 20);
  assert.match(lines[0]!, /^backlog\s+3$/);
  assert.ok(lines.some((l) => /^diskBytes\s+4160 \(4\.1 KiB\)$/.test(l)), res.stdout.toString());
});

test('a queue held by another process: stats, push, drain and verify exit 2 with one clear line', async (t) => {
  const dir = join(tmp.dir, 'locked');
  const held = await DiskQueue.open(dir);
  t.after(() => held.close());
  for (const args of [['stats', dir], ['push', dir], ['drain', dir], ['verify', dir]]) {
    const res = await ferry(args, { input: 'x\n' });
    assert.equal(res.code, 2, `${args[0]}: ${res.stderr}`);
    assert.equal(res.stderr, `ferry: ${dir} is locked: another process has this queue open\n`);
    assert.ok(!hasStackTrace(res.stderr));
  }
});

test('--lock-timeout waits for the holder to let go', async () => {
  const dir = join(tmp.dir, 'released');
  const held = await DiskQueue.open(dir);
  setTimeout(() => void held.close(), 300);
  const res = await ferry(['push', dir, '--lock-timeout', '20000', '-q'], { input: 'x\n' });
  assert.equal(res.code, 0, res.stderr);
  assert.equal((await ferry(['drain', dir, '-q'])).stdout.toString(), 'x\n');
});

test('stats, drain and verify of a missing directory exit 2 and create nothing', async () => {
  const dir = join(tmp.dir, 'missing');
  for (const cmd of ['stats', 'drain', 'verify']) {
    const res = await ferry([cmd, dir]);
    assert.equal(res.code, 2);
    assert.equal(res.stderr, `ferry: no queue at ${dir}: the directory does not exist\n`);
  }
  assert.equal(existsSync(dir), false);
});
