import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ferry, scratch, hasStackTrace, rawFrames } from './helpers.js';

const tmp = await scratch();
after(() => tmp.cleanup());

/** One line on stderr, no stack trace. */
function oneLine(stderr: string): void {
  assert.equal(stderr.trimEnd().split('\n').length, 1, stderr);
  assert.ok(!hasStackTrace(stderr), stderr);
}

test('a --raw stream cut inside a record keeps the complete records before it', async () => {
  const q = join(tmp.dir, 'cut-body');
  const input = Buffer.concat([rawFrames([Buffer.from('one'), Buffer.from('two')]), Buffer.from([0, 0, 0, 9, 0x61, 0x62])]);
  const res = await ferry(['push', q, '--raw'], { input });
  assert.equal(res.code, 1);
  assert.equal(res.stderr, 'ferry: stdin: input ends inside a record: 2 of its 9 bytes arrived (at input byte 20); 2 records before it were stored\n');
  const drained = await ferry(['drain', q, '--raw', '-q']);
  assert.deepEqual(drained.stdout, rawFrames([Buffer.from('one'), Buffer.from('two')]));
});

test('a --raw stream cut inside a length prefix', async () => {
  const q = join(tmp.dir, 'cut-prefix');
  const input = Buffer.concat([rawFrames([Buffer.from('one')]), Buffer.from([0, 0])]);
  const res = await ferry(['push', q, '--raw'], { input });
  assert.equal(res.code, 1);
  assert.match(res.stderr, /input ends inside a length prefix: 2 of 4 bytes arrived .*; 1 records before it were stored/);
  oneLine(res.stderr);
  assert.equal((await ferry(['drain', q, '-q'])).stdout.toString(), 'one\n');
});

test('an absurd --raw length is refused; records before it in the same chunk are kept', async () => {
  const q = join(tmp.dir, 'absurd');
  const input = Buffer.concat([rawFrames([Buffer.from('ok')]), Buffer.from([0xff, 0xff, 0xff, 0xff, 1, 2, 3])]);
  const res = await ferry(['push', q, '--raw'], { input });
  assert.equal(res.code, 1);
  assert.match(res.stderr, /length prefix 4294967295 exceeds the 1073741824-byte record limit .*; 1 records before it were stored/);
  oneLine(res.stderr);
  assert.equal((await ferry(['drain', q, '-q'])).stdout.toString(), 'ok\n');
});

test('an unreadable FILE exits 2 before any queue is created', async () => {
  const q = join(tmp.dir, 'never');
  const missing = await ferry(['push', q, join(tmp.dir, 'no-such-file')]);
  assert.equal(missing.code, 2);
  assert.equal(missing.stderr, `ferry: cannot read ${join(tmp.dir, 'no-such-file')}: no such file or directory (ENOENT)\n`);
  const dir = await ferry(['push', q, tmp.dir]);
  assert.equal(dir.code, 2);
  assert.equal(dir.stderr, `ferry: cannot read ${tmp.dir}: it is a directory\n`);
  assert.equal(existsSync(q), false);
});

test('usage errors exit 2 with one message and no stack trace', async () => {
  const cases: Array<[string[], RegExp]> = [
    [['push'], /missing required argument 'dir'/],
    [['push', join(tmp.dir, 'u'), '--bogus'], /unknown option '--bogus'/],
    [['drain', join(tmp.dir, 'u'), '--max', 'lots'], /option '--max <n>' argument 'lots' is invalid\. expected a whole number/],
    [['frobnicate'], /unknown command 'frobnicate'/],
    [['stats', 'a', 'b'], /too many arguments/],
  ];
  for (const [args, message] of cases) {
    const res = await ferry(args);
    assert.equal(res.code, 2, `${args.join(' ')}: ${res.stderr}`);
    assert.match(res.stderr, message);
    assert.match(res.stderr, /^ferry: /);
    assert.ok(!hasStackTrace(res.stderr));
  }
});

test('--help and --version exit 0', async () => {
  const help = await ferry(['--help']);
  assert.equal(help.code, 0);
  assert.match(help.stdout.toString(), /push \[options\] <dir> \[file\]/);
  const version = await ferry(['--version']);
  assert.equal(version.code, 0);
  assert.match(version.stdout.toString(), /^\d+\.\d+\.\d+\n$/);
});

test('a full queue stops push with the count stored; those records stay', async () => {
  const q = join(tmp.dir, 'full');
  // Each record frames to 1 + 9 + 8 = 18 bytes; a 40-byte cap admits two.
  const res = await ferry(['push', q, '--max-bytes', '40', '--batch', '1'], { input: 'aaaaaaaaa\nbbbbbbbbb\nccccccccc\n' });
  assert.equal(res.code, 1);
  assert.match(res.stderr, /backlog would exceed maxBytes 40 \(ERR_FULL\); 2 records before it were stored/);
  oneLine(res.stderr);
  assert.equal((await ferry(['drain', q, '-q'])).stdout.toString(), 'aaaaaaaaa\nbbbbbbbbb\n');
});
