/**
 * Private by default (issue 7, item 7): a queue's directory and segment files
 * are created 0700 and 0600, `dirMode`/`fileMode` widen them for a group, and
 * the process umask is always applied on top, so nothing is ever looser than
 * the umask allows. The umask is process-wide: each test sets it and restores
 * it before anything else runs (node:test runs a file's tests one at a time).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { statSync, mkdirSync, chmodSync } from 'node:fs';
import { join } from 'node:path';
import { DiskQueue, InvalidArgumentError } from '../../src/diskqueue/index.js';
import { tempDir } from '../helpers/tmp.js';

const perm = (path: string) => statSync(path).mode & 0o777;

/** Runs `fn` with the process umask set to `mask`, restoring the old one after. */
async function withUmask<R>(mask: number, fn: () => Promise<R>): Promise<R> {
  const old = process.umask(mask);
  try {
    return await fn();
  } finally {
    process.umask(old);
  }
}

/** Opens a queue in a new directory `parent/q/sub`, adds enough to roll two segments, and returns the modes. */
async function modes(mask: number, options: { fileMode?: number; dirMode?: number }) {
  const parent = tempDir();
  const dir = join(parent, 'q', 'sub');
  await withUmask(mask, async () => {
    const q = await DiskQueue.open(dir, { segmentSize: 4096, ...options });
    for (let i = 0; i < 3; i++) await q.add(new Uint8Array(2000));
    await q.close();
  });
  return { dir: perm(dir), parent: perm(join(parent, 'q')), seg1: perm(join(dir, 'data.00000001')), seg2: perm(join(dir, 'data.00000002')) };
}

describe('file and directory modes', () => {
  for (const mask of [0o022, 0o077]) {
    it(`default under umask ${mask.toString(8).padStart(3, '0')}: 0700 directories, 0600 segments`, async () => {
      assert.deepEqual(await modes(mask, {}), { dir: 0o700, parent: 0o700, seg1: 0o600, seg2: 0o600 });
    });
  }

  it('fileMode 0o640 and dirMode 0o750 under umask 022: the group may read', async () => {
    assert.deepEqual(await modes(0o022, { fileMode: 0o640, dirMode: 0o750 }), { dir: 0o750, parent: 0o750, seg1: 0o640, seg2: 0o640 });
  });

  it('under umask 077 the same options stay private: never looser than the umask', async () => {
    assert.deepEqual(await modes(0o077, { fileMode: 0o640, dirMode: 0o750 }), { dir: 0o700, parent: 0o700, seg1: 0o600, seg2: 0o600 });
  });

  it('an existing directory keeps its mode', async () => {
    const dir = join(tempDir(), 'q');
    mkdirSync(dir);
    chmodSync(dir, 0o755);
    await withUmask(0o022, async () => {
      const q = await DiskQueue.open(dir);
      await q.add(new Uint8Array(1));
      await q.close();
    });
    assert.equal(perm(dir), 0o755);
    assert.equal(perm(join(dir, 'data.00000001')), 0o600);
  });

  it('rejects modes that are not permission bits', async () => {
    const dir = tempDir();
    for (const bad of [-1, 0o1000, 1.5, Number.NaN]) {
      await assert.rejects(DiskQueue.open(dir, { fileMode: bad }), InvalidArgumentError);
      await assert.rejects(DiskQueue.open(dir, { dirMode: bad }), InvalidArgumentError);
    }
  });
});
