import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnChild } from '../helpers/children.js';
import { join } from 'node:path';
import { CLI, ferry, scratch, ROOT } from './helpers.js';

const tmp = await scratch();
after(() => tmp.cleanup());

test('drain --follow delivers records pushed later by another process, and SIGTERM ends it with exit 0', async (t) => {
  const q = join(tmp.dir, 'q');
  assert.equal((await ferry(['push', q, '-q'], { input: 'first\n' })).code, 0);

  const child = spawnChild(process.execPath, [...CLI, 'drain', q, '--follow', '--poll-ms', '50'], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (b: Buffer) => (out += b));
  child.stderr.on('data', (b: Buffer) => (err += b));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const seen = async (text: string) => {
    const deadline = Date.now() + 30_000;
    while (!out.includes(text)) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${JSON.stringify(text)}; got ${JSON.stringify(out)}; stderr ${err}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  await seen('first\n');
  // The follower lets go of the lock while idle; the producer waits for it if they collide.
  const pushed = await ferry(['push', q, '--lock-timeout', '20000', '-q'], { input: 'second\nthird\n' });
  assert.equal(pushed.code, 0, pushed.stderr);
  await seen('third\n');
  child.kill('SIGTERM');
  assert.equal(await exited, 0, err);
  assert.equal(out, 'first\nsecond\nthird\n');
  assert.match(err, /drained 3 records/);
  assert.equal((await ferry(['drain', q, '-q'])).stdout.length, 0, 'all three were committed');
});
