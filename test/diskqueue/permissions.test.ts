/**
 * Private by default: a queue's directory and segment files
 * are created 0700 and 0600, `dirMode`/`fileMode` widen them for a group, and
 * the process umask is always applied on top, so nothing is ever looser than
 * the umask allows. The umask is process-wide: each test sets it and restores
 * it before anything else runs (node:test runs a file's tests one at a time).
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { statSync, mkdirSync, chmodSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DiskQueue, InvalidArgumentError, IOError } from '../../src/diskqueue/index.js';
import { FaultyFileSystem } from '../../src/storage/faulty.js';
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

describe('an open refused by permissions names the errno', () => {
  it('a segment that cannot be opened: IOError naming EACCES and the file (in-memory)', async () => {
    const fs = new FaultyFileSystem();
    const q = await DiskQueue.open('/q', { fs });
    await q.add(new Uint8Array(1));
    await q.close();
    fs.inject({ step: 'open', error: 'EACCES', path: 'data.00000001' });
    await assert.rejects(DiskQueue.open('/q', { fs }), (e) => {
      assert.ok(e instanceof IOError, String(e));
      assert.match(e.message, /EACCES.*\/q\/data\.00000001/);
      assert.equal(e.errno, 'EACCES');
      return true;
    });
  });

  /**
   * The real thing, as a user who does not own the files: a child that drops
   * to `nobody` when this process is root (root is never refused), else with
   * the modes taken away from this user.
   */
  async function asStranger(dir: string, takeFiles = true): Promise<Array<{ format: string; name?: string; code?: string; message?: string; opened?: boolean }>> {
    const root = process.getuid?.() === 0;
    const undo: Array<() => void> = [];
    if (!root && takeFiles) {
      for (const f of readdirSync(dir)) {
        chmodSync(join(dir, f), 0);
        undo.push(() => chmodSync(join(dir, f), 0o600));
      }
    }
    try {
      const child = fileURLToPath(new URL('./open-child.ts', import.meta.url));
      const r = spawnSync(process.execPath, ['--import', 'tsx', child, dir, ...(root ? ['--as-nobody'] : [])], {
        cwd: fileURLToPath(new URL('../..', import.meta.url)),
        encoding: 'utf8',
        timeout: 120_000,
      });
      assert.equal(r.status, 0, r.stderr);
      return r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    } finally {
      for (const u of undo) u();
    }
  }

  it('a DiskQueue whose segment the user may not read: IOError naming EACCES and the file, from both opens', async () => {
    const dir = join(tempDir(), 'q');
    const q = await DiskQueue.open(dir, { dirMode: 0o755 });
    await q.add(new Uint8Array(1));
    await q.close();
    chmodSync(dir, 0o755);
    chmodSync(join(dir, '..'), 0o755);
    const [dq, sp] = await asStranger(dir);
    assert.equal(dq!.name, 'IOError', JSON.stringify(dq));
    assert.equal(dq!.code, 'ERR_IO');
    assert.match(dq!.message!, /EACCES.*data\.00000001/);
    // The spool's open is refused too, for the lock or for the format, never opened.
    assert.notEqual(sp!.opened, true);
  });

  it('a directory the user may not open: IOError (not a bare Error) naming EACCES and the directory, from both opens', async () => {
    const dir = join(tempDir(), 'q');
    const q = await DiskQueue.open(dir);
    await q.close();
    chmodSync(join(dir, '..'), 0o755);
    chmodSync(dir, process.getuid?.() === 0 ? 0o711 : 0o311);
    try {
      for (const r of await asStranger(dir, false)) {
        assert.equal(r.name, 'IOError', JSON.stringify(r));
        assert.equal(r.code, 'ERR_IO');
        assert.ok(r.message!.includes('EACCES') && r.message!.includes(dir), r.message);
      }
    } finally {
      chmodSync(dir, 0o700);
    }
  });
});
