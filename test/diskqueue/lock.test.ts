import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnChild } from '../helpers/children.js';
import { DiskQueue, LockedError } from '../../src/diskqueue/index.js';
import { tempDir } from '../helpers/tmp.js';

test('a second open of the same directory in this process is LockedError; close frees it', async () => {
  const dir = tempDir();
  const q = await DiskQueue.open(dir);
  await assert.rejects(DiskQueue.open(dir), LockedError);
  await q.close();
  const q2 = await DiskQueue.open(dir);
  await q2.close();
});

test('two closes at once: the lock is free when either resolves, and both see the same outcome', async () => {
  const dir = tempDir();
  const q = await DiskQueue.open(dir);
  await q.add(new Uint8Array([1]));
  // Reopening at each close's resolution: the second call used to resolve at
  // once, while the first still flushed and held the lock (ERR_LOCKED).
  const reopenAt = (closing: Promise<void>) => closing.then(async () => (await DiskQueue.open(dir)).close());
  const [first, second] = [q.close(), q.close()];
  assert.equal(first, second, 'a close made while one runs returns the running one');
  await reopenAt(second);
  await first;
  const again = await DiskQueue.open(dir);
  const got = await again.reader().tryTake();
  assert.deepEqual(got?.value, new Uint8Array([1]));
  await again.close();
});

test('a lock held by another process excludes us, and does not outlive that process when it is killed', async () => {
  const dir = tempDir();
  const child = spawnChild(
    process.execPath,
    ['--import', 'tsx', '-e', `import('./src/diskqueue/index.ts').then(async (m) => { await m.DiskQueue.open(${JSON.stringify(dir)}); process.stdout.write('held\\n'); setInterval(() => {}, 1000); })`],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (d) => String(d).includes('held') && resolve());
    child.on('exit', (code) => reject(new Error(`child exited ${code}`)));
  });
  const err = await DiskQueue.open(dir).catch((e) => e);
  assert.ok(err instanceof LockedError);
  assert.equal(err.code, 'ERR_LOCKED');
  const exited = new Promise((r) => child.on('exit', r));
  child.kill('SIGKILL');
  await exited;
  const q = await DiskQueue.open(dir);
  await q.close();
});
