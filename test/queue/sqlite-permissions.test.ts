/**
 * The SQLite store keeps queued payloads private like the disk queue does:
 * the database file it creates, and the -wal and -shm files SQLite makes
 * beside it, are 0600 even under umask 022. The umask is process-wide; each
 * test sets it and restores it (node:test runs a file's tests one at a time).
 */
import assert from 'node:assert/strict';
import { chmodSync, existsSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { IOError } from '../../src/errors.js';
import { SqliteStore } from '../../src/queue/stores/sqlite/store.js';
import { tempDir } from '../helpers/tmp.js';

const perm = (path: string) => statSync(path).mode & 0o777;

async function withUmask<R>(mask: number, fn: () => Promise<R>): Promise<R> {
  const old = process.umask(mask);
  try {
    return await fn();
  } finally {
    process.umask(old);
  }
}

/** Opens a store at `path`, writes one message, and returns the three files' modes while it is open. */
async function modesAfterWrite(path: string) {
  const s = await SqliteStore.open({ path });
  try {
    await s.ensureGroup('t', 'g', 'latest');
    await s.append([{ id: 'm', topic: 't', payload: new Uint8Array([1, 2, 3]), publishedAt: new Date() }]);
    return { db: perm(path), wal: perm(`${path}-wal`), shm: perm(`${path}-shm`) };
  } finally {
    await s.close();
  }
}

describe('sqlite store file modes', () => {
  for (const mask of [0o022, 0o002, 0o077]) {
    it(`creates the database, -wal and -shm 0600 under umask ${mask.toString(8).padStart(3, '0')}`, async () => {
      const path = join(tempDir(), 'q.db');
      assert.deepEqual(await withUmask(mask, () => modesAfterWrite(path)), { db: 0o600, wal: 0o600, shm: 0o600 });
      // Reopening keeps the modes.
      assert.deepEqual(await withUmask(mask, () => modesAfterWrite(path)), { db: 0o600, wal: 0o600, shm: 0o600 });
    });
  }

  it('leaves the mode of an existing database file alone, and SQLite follows it for -wal and -shm', async () => {
    const path = join(tempDir(), 'shared.db');
    writeFileSync(path, '');
    chmodSync(path, 0o640);
    assert.deepEqual(await withUmask(0o022, () => modesAfterWrite(path)), { db: 0o640, wal: 0o640, shm: 0o640 });
  });

  it('a database in a missing directory is an IOError, and nothing is created', async () => {
    const path = join(tempDir(), 'missing', 'q.db');
    await assert.rejects(SqliteStore.open({ path }), (e: unknown) => e instanceof IOError && e.code === 'ERR_IO');
    assert.throws(() => statSync(path), { code: 'ENOENT' });
  });

  it(':memory: is left to SQLite: no file of that name is created, and the database holds messages', async () => {
    const s = await SqliteStore.open({ path: ':memory:' });
    try {
      await s.ensureGroup('t', 'g', 'latest');
      await s.append([{ id: 'm', topic: 't', payload: new Uint8Array([1, 2, 3]), publishedAt: new Date() }]);
      const claimed = await s.claim({ topic: 't', group: 'g', runnerId: 'test', max: 10, leaseMs: 60_000, maxInFlight: 0 });
      assert.deepEqual(claimed.map((c) => [c.message.id, [...c.message.payload]]), [['m', [1, 2, 3]]]);
    } finally {
      await s.close();
    }
    assert.equal(existsSync(':memory:'), false, 'no file named :memory: in the working directory');
  });
});
