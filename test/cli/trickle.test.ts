import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnChild } from '../helpers/children.js';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DiskQueue } from '../../src/diskqueue/index.js';
import { decodeHeader } from '../../src/diskqueue/format.js';
import { tempDir } from '../helpers/tmp.js';
import { CLI } from './helpers.js';

/** Records the first segment's header says are published (push holds the lock, so no open). */
function publishedRecords(dir: string): number {
  let files: string[] = [];
  try {
    files = readdirSync(dir).filter((f) => f.startsWith('data.'));
  } catch {
    return 0;
  }
  if (files.length === 0) return 0;
  const h = decodeHeader(readFileSync(join(dir, files.sort()[0]!)).subarray(0, 64));
  return h.ok ? h.header.writtenCount : 0;
}

test('push from a slow pipe stores each line as it arrives, not when a batch fills', async () => {
  const dir = join(tempDir(), 'q');
  const child = spawnChild(process.execPath, [...CLI, 'push', '-q', dir], { stdio: ['pipe', 'ignore', 'inherit'] });
  child.stdin.write('first line\n');
  // The producer stays open (like `tail -F`); the line must be stored anyway.
  let published = 0;
  // The deadline is a hang bound (the line is stored within a second or so of a start).
  for (const deadline = Date.now() + 120_000; Date.now() < deadline && published === 0; ) {
    await new Promise((r) => setTimeout(r, 100));
    published = publishedRecords(dir);
  }
  const exited = new Promise((r) => child.on('exit', r));
  child.kill('SIGKILL');
  await exited;
  assert.equal(published, 1, 'the first line was published while the producer was still open');
  const q = await DiskQueue.open(dir);
  const v = await q.reader().tryTake();
  assert.equal(new TextDecoder().decode(v?.value), 'first line');
  await q.close();
});
