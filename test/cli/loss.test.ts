/**
 * No loss goes unmentioned by the CLI: a segment missing
 * from between others, and a segment with an unreadable header and nothing
 * to salvage, are each reported by `push` (which opens but does not read),
 * `stats` (likewise, and exits 1), `drain` (which meets them as a
 * CorruptError and exits 1) and `verify` (which exits 1), on stderr; so is a
 * segment of an unknown format version, which raises no event of its own,
 * and a spool segment whose header is damaged, which only a pop would tell of.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { rm, writeFile, readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { DiskQueue } from '../../src/diskqueue/index.js';
import { HEADER_SIZE, decodeHeader, encodeHeader } from '../../src/diskqueue/format.js';
import { Spool } from '../../src/spool/index.js';
import { ferry, scratch } from './helpers.js';

const tmp = await scratch();
after(() => tmp.cleanup());
let n = 0;

/** A closed queue of 3 segments, 31 records each of 120 bytes (129 framed) (4096-byte segments). */
async function threeSegments(): Promise<string> {
  const dir = join(tmp.dir, `q${++n}`);
  const q = await DiskQueue.open(dir, { segmentSize: 4096 });
  for (let i = 0; i < 93; i++) await q.add(Buffer.from(`r${String(i).padStart(3, '0')}`.padEnd(120, '.')));
  await q.close();
  assert.deepEqual((await readdir(dir)).sort(), ['data.00000001', 'data.00000002', 'data.00000003']);
  return dir;
}

const damages: Array<[string, (dir: string) => Promise<void>]> = [
  ['a segment missing from the middle', (dir) => rm(join(dir, 'data.00000002'))],
  [
    'a middle segment zeroed whole',
    async (dir) => writeFile(join(dir, 'data.00000002'), Buffer.alloc((await readFile(join(dir, 'data.00000002'))).length)),
  ],
];

for (const [name, damage] of damages) {
  test(`${name}: verify exits 1 and says so on stderr`, async () => {
    const dir = await threeSegments();
    await damage(dir);
    const run = await ferry(['verify', dir]);
    assert.equal(run.code, 1);
    assert.match(run.stdout.toString(), /segment 2 at byte 0: segment-(missing|zero)/);
    assert.match(run.stderr, /is damaged: 1 damaged span/);
  });

  test(`${name}: push says what the open found on stderr`, async () => {
    const dir = await threeSegments();
    await damage(dir);
    const run = await ferry(['push', dir], { input: 'one more\n' });
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /found 1 damaged span\(s\): 31 records \(.*\) lost, 1 whole segment/);
  });

  test(`${name}: drain meets it as damage, says so and exits 1`, async () => {
    const dir = await threeSegments();
    await damage(dir);
    const run = await ferry(['drain', dir]);
    assert.equal(run.code, 1);
    assert.equal(run.stdout.toString().split('\n').filter(Boolean).length, 62);
    assert.match(run.stderr, /skipped damaged data: .*segment 2/);
    assert.match(run.stderr, /1 damaged span\(s\) were skipped \(31 records lost\)/);
  });
}

test('stats: damage its open found is told on stderr and exits 1 (an open may repair it away)', async () => {
  const dir = await threeSegments();
  await rm(join(dir, 'data.00000002'));
  const run = await ferry(['stats', dir, '--json']);
  assert.equal(run.code, 1, run.stderr);
  assert.match(run.stderr, /found 1 damaged span\(s\): 31 records \(.*\) lost, 1 whole segment/);
  assert.equal(JSON.parse(run.stdout.toString()).lostSegments, 1, 'the stats still print');
});

test('a segment of an unknown format version: drain tells of it and exits 1, as verify does (its records uncounted); stats too', async () => {
  for (const command of ['verify', 'drain', 'stats'] as const) {
    const dir = await threeSegments();
    // As a newer writer would leave it: version 2 under a checksum that holds.
    const path = join(dir, 'data.00000002');
    const file = await readFile(path);
    const decoded = decodeHeader(file.subarray(0, HEADER_SIZE));
    assert.ok(decoded.ok);
    file.set(encodeHeader({ ...decoded.header, version: 2 }), 0);
    await writeFile(path, file);
    const run = await ferry([command, dir]);
    assert.equal(run.code, 1, `${command}: ${run.stderr}`);
    if (command === 'verify') {
      assert.match(run.stderr, /1 damaged span\(s\), about 0 records lost, plus those of 1 span\(s\) whose records cannot be counted/);
      continue;
    }
    assert.match(run.stderr, /opening .* dropped 1 segment\(s\) of an unknown format version/, command);
    if (command === 'drain') {
      assert.equal(run.stdout.toString().split('\n').filter(Boolean).length, 62);
      assert.match(run.stderr, /1 segment\(s\) of an unknown format version were dropped; run ferry stats or ferry verify/);
    }
  }
});

test('a spool segment with a damaged header: push and stats, which do not pop, tell of it and count it; drain after them is clean', async () => {
  for (const command of ['push', 'stats'] as const) {
    const dir = join(tmp.dir, `spool-header-${command}`);
    const s = await Spool.open(dir, { segmentBytes: 256 });
    for (let i = 0; i < 40; i++) await s.appendNoSync(Buffer.from(`rec-${String(i).padStart(2, '0')}`));
    await s.sync();
    await s.close();
    const seg2 = join(dir, `${String(2).padStart(20, '0')}.seg`);
    const bytes = await readFile(seg2);
    bytes[2]! ^= 0x01; // a bit of the magic
    await writeFile(seg2, bytes);
    const run = command === 'push' ? await ferry(['push', dir], { input: 'late\n' }) : await ferry(['stats', dir]);
    assert.match(run.stderr, /skipped damaged data: opening .* dropped 1 segment\(s\) with a damaged header \(.*\): their records are lost/, command);
    assert.equal(run.code, command === 'push' ? 0 : 1, `${command}: ${run.stderr}`);
  }
});
