/**
 * No loss goes unmentioned by the CLI: a segment missing
 * from between others, and a segment with an unreadable header and nothing
 * to salvage, are each reported by `push` (which opens but does not read),
 * `drain` (which meets them as a CorruptError and exits 1) and `verify`
 * (which exits 1), on stderr.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { rm, writeFile, readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { DiskQueue } from '../../src/diskqueue/index.js';
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
