import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ferry, scratch, rawFrames } from './helpers.js';

const tmp = await scratch();
after(() => tmp.cleanup());
let n = 0;
const queueDir = () => join(tmp.dir, `q${++n}`);

test('lines: empty lines, a CR and a last line without newline round-trip; every output line ends in \\n', async () => {
  const q = queueDir();
  const input = 'one\n\n\ttwo\r\n\nlast';
  const pushed = await ferry(['push', q], { input });
  assert.equal(pushed.code, 0, pushed.stderr);
  assert.match(pushed.stderr, /pushed 5 records \(12 B\)/);
  assert.match(pushed.stderr, /records\/s/);

  const drained = await ferry(['drain', q]);
  assert.equal(drained.code, 0, drained.stderr);
  assert.equal(drained.stdout.toString(), 'one\n\n\ttwo\r\n\nlast\n');
  assert.match(drained.stderr, /drained 5 records/);

  const again = await ferry(['drain', q]);
  assert.equal(again.code, 0);
  assert.equal(again.stdout.length, 0, 'everything drained was committed');
});

test('lines from a FILE argument, newline-terminated input comes back byte for byte', async () => {
  const q = queueDir();
  const file = join(tmp.dir, 'lines.txt');
  const input = 'alpha\nbravo\n\ncharlie\n';
  await writeFile(file, input);
  assert.equal((await ferry(['push', q, file, '-q'])).code, 0);
  const drained = await ferry(['drain', q, '-q']);
  assert.equal(drained.stdout.toString(), input);
  assert.equal(drained.stderr, '', '--quiet prints no summary');
});

test('empty input stores nothing', async () => {
  const q = queueDir();
  const pushed = await ferry(['push', q], { input: '' });
  assert.equal(pushed.code, 0);
  assert.match(pushed.stderr, /pushed 0 records/);
  const drained = await ferry(['drain', q]);
  assert.equal(drained.code, 0);
  assert.equal(drained.stdout.length, 0);
});

test('raw: arbitrary bytes (newlines, NUL, invalid UTF-8, empty records) round-trip exactly', async () => {
  const q = queueDir();
  const all = Uint8Array.from({ length: 256 }, (_, i) => i);
  const records = [all, new Uint8Array(0), Buffer.from([0xff, 0xfe, 0x0a, 0xc3, 0x28]), Buffer.from('\n\n'), new Uint8Array(0)];
  const input = rawFrames(records);
  const pushed = await ferry(['push', q, '--raw'], { input });
  assert.equal(pushed.code, 0, pushed.stderr);
  assert.match(pushed.stderr, /pushed 5 records/);
  const drained = await ferry(['drain', q, '--raw']);
  assert.equal(drained.code, 0, drained.stderr);
  assert.deepEqual(drained.stdout, input);
});

test('a large input spanning many chunks and batches, with a line longer than a read chunk', async () => {
  const q = queueDir();
  const lines: string[] = [];
  for (let i = 0; i < 40_000; i++) lines.push(i % 7 === 0 ? '' : `line ${i} ${'x'.repeat(i % 97)}`);
  lines.splice(20_000, 0, 'L'.repeat(300 * 1024));
  const input = `${lines.join('\n')}\n`;
  const file = join(tmp.dir, 'big.txt');
  await writeFile(file, input);
  const pushed = await ferry(['push', q, file, '--batch', '1000']);
  assert.equal(pushed.code, 0, pushed.stderr);
  assert.match(pushed.stderr, new RegExp(`pushed ${lines.length} records`));
  const st = await ferry(['stats', q, '--json']);
  assert.equal(JSON.parse(st.stdout.toString()).backlog, lines.length);
  const drained = await ferry(['drain', q, '--batch', '333']);
  assert.equal(drained.code, 0, drained.stderr);
  assert.equal(drained.stdout.length, Buffer.byteLength(input));
  assert.ok(drained.stdout.equals(Buffer.from(input)), 'output equals input');
});

test('--max stops after N records; the rest stay for the next drain', async () => {
  const q = queueDir();
  await ferry(['push', q, '-q'], { input: 'a\nb\nc\nd\ne\n' });
  const first = await ferry(['drain', q, '--max', '2']);
  assert.equal(first.code, 0);
  assert.equal(first.stdout.toString(), 'a\nb\n');
  const rest = await ferry(['drain', q]);
  assert.equal(rest.stdout.toString(), 'c\nd\ne\n');
});

test('--no-sync and --sync-every still leave every record stored after push returns', async () => {
  const q = queueDir();
  assert.equal((await ferry(['push', q, '--no-sync', '-q'], { input: '1\n2\n' })).code, 0);
  assert.equal((await ferry(['push', q, '--sync-every', '3', '-q'], { input: '3\n4\n5\n6\n' })).code, 0);
  const drained = await ferry(['drain', q, '-q']);
  assert.equal(drained.stdout.toString(), '1\n2\n3\n4\n5\n6\n');
});

test('--no-sync with --sync-every is a usage error, and nothing is stored', async () => {
  const q = queueDir();
  const res = await ferry(['push', q, '--no-sync', '--sync-every', '3'], { input: '1\n2\n' });
  assert.equal(res.code, 2, res.stderr);
  assert.match(res.stderr, /give at most one of --no-sync and --sync-every/);
  assert.equal((await ferry(['drain', q, '-q'])).stdout.toString(), '');
});

test('a queue made with another --segment-size is reopened with its own size', async () => {
  const q = queueDir();
  assert.equal((await ferry(['push', q, '--segment-size', '4096', '-q'], { input: 'x'.repeat(3000) + '\n' + 'y'.repeat(3000) + '\n' })).code, 0);
  assert.equal((await ferry(['push', q, '-q'], { input: 'z\n' })).code, 0);
  const st = JSON.parse((await ferry(['stats', q, '--json'])).stdout.toString());
  assert.equal(st.backlog, 3);
  assert.equal(st.segments, 2, 'two 3000-byte records do not share a 4 KiB segment');
  const drained = await ferry(['drain', q, '-q']);
  assert.equal(drained.stdout.toString(), `${'x'.repeat(3000)}\n${'y'.repeat(3000)}\nz\n`);
});

test('a drain whose stdout reader is gone commits nothing and exits 1', async () => {
  const q = queueDir();
  await ferry(['push', q, '-q'], { input: 'a\nb\nc\n' });
  const res = await ferry(['drain', q], { closeStdout: true });
  assert.equal(res.code, 1);
  assert.match(res.stderr, /cannot write to stdout: .*EPIPE/);
  assert.match(res.stderr, /those 3 records stay queued; 0 records were delivered/);
  const rest = await ferry(['drain', q, '-q']);
  assert.equal(rest.stdout.toString(), 'a\nb\nc\n');
});
