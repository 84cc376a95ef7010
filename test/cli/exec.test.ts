import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ferry, scratch } from './helpers.js';

const tmp = await scratch();
after(() => tmp.cleanup());
let n = 0;
const fresh = () => {
  n++;
  return { q: join(tmp.dir, `q${n}`), out: join(tmp.dir, `out${n}`), count: join(tmp.dir, `count${n}`) };
};
const read = (path: string) => readFile(path, 'utf8').catch(() => '');

test('--exec gives each record, unframed, to its own process', async () => {
  const { q, out } = fresh();
  await ferry(['push', q, '-q'], { input: 'a\n\nccc\n' });
  const res = await ferry(['drain', q, '--exec', 'cat >> "$OUT"; echo "|" >> "$OUT"'], { env: { OUT: out } });
  assert.equal(res.code, 0, res.stderr);
  assert.equal(await read(out), 'a|\n|\nccc|\n');
  assert.match(res.stderr, /drained 3 records/);
});

test('a failing --exec stops the drain and leaves its record queued for the next drain', async () => {
  const { q, out } = fresh();
  await ferry(['push', q, '-q'], { input: 'a\nb\nc\n' });
  // Succeeds for every record but "b".
  const cmd = 'r=$(cat); [ "$r" != b ] || exit 3; printf "%s," "$r" >> "$OUT"';
  const res = await ferry(['drain', q, '--exec', cmd], { env: { OUT: out } });
  assert.equal(res.code, 1, res.stderr);
  assert.match(res.stderr, /exited with status 3; the record stays queued; 1 records were delivered/);
  assert.equal(await read(out), 'a,');
  const second = await ferry(['drain', q, '-q']);
  assert.equal(second.code, 0);
  assert.equal(second.stdout.toString(), 'b\nc\n', 'the failed record is still at the head');
});

test('a command killed by a signal counts as a failure', async () => {
  const { q } = fresh();
  await ferry(['push', q, '-q'], { input: 'x\n' });
  const res = await ferry(['drain', q, '--exec', 'kill -TERM $$']);
  assert.equal(res.code, 1);
  assert.match(res.stderr, /killed by SIGTERM/);
  assert.equal((await ferry(['drain', q, '-q'])).stdout.toString(), 'x\n');
});

test('--exec-batch feeds N line-framed records to one process and commits them together', async () => {
  const { q, out, count } = fresh();
  await ferry(['push', q, '-q'], { input: '1\n2\n3\n4\n5\n' });
  const res = await ferry(['drain', q, '--exec', 'cat >> "$OUT"; echo run >> "$COUNT"', '--exec-batch', '2'], {
    env: { OUT: out, COUNT: count },
  });
  assert.equal(res.code, 0, res.stderr);
  assert.equal(await read(out), '1\n2\n3\n4\n5\n');
  assert.equal(await read(count), 'run\nrun\nrun\n', '5 records in batches of 2 take 3 processes');
});

test('a failed batch commits none of its records', async () => {
  const { q, out } = fresh();
  await ferry(['push', q, '-q'], { input: '1\n2\n3\n4\n5\n' });
  // The first batch (1,2) succeeds; the second (3,4) fails after reading its input.
  const cmd = 'in=$(cat); case "$in" in 3*) exit 4;; esac; printf "%s\\n" "$in" >> "$OUT"';
  const res = await ferry(['drain', q, '--exec', cmd, '--exec-batch', '2'], { env: { OUT: out } });
  assert.equal(res.code, 1);
  assert.match(res.stderr, /status 4; those 2 records stay queued; 2 records were delivered/);
  assert.equal(await read(out), '1\n2\n');
  assert.equal((await ferry(['drain', q, '-q'])).stdout.toString(), '3\n4\n5\n');
});

test('--exec-batch with --raw frames records with their length', async () => {
  const { q, out } = fresh();
  await ferry(['push', q, '-q'], { input: 'ab\nc\n' });
  const res = await ferry(['drain', q, '--raw', '--exec', 'cat > "$OUT"', '--exec-batch', '10'], { env: { OUT: out } });
  assert.equal(res.code, 0, res.stderr);
  assert.deepEqual(await readFile(out), Buffer.from([0, 0, 0, 2, 0x61, 0x62, 0, 0, 0, 1, 0x63]));
});

test('--exec-batch without --exec is a usage error', async () => {
  const { q } = fresh();
  await ferry(['push', q, '-q'], { input: 'a\n' });
  const res = await ferry(['drain', q, '--exec-batch', '2']);
  assert.equal(res.code, 2);
  assert.match(res.stderr, /--exec-batch needs --exec/);
});
