/** SQLite-specific behaviour: WAL mode, lazy loading of the driver, and surviving a killed consumer. */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { spawnChild } from '../helpers/children.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { IOError } from '../../src/errors.js';
import { createQueue } from '../../src/queue/index.js';
import Database from 'better-sqlite3';
import { PAGE_SIZE, SqliteStore } from '../../src/queue/stores/sqlite/store.js';
import { counts, waitFor } from '../stores/helpers.js';

const here = dirname(fileURLToPath(import.meta.url));
const enc = (s: string) => new TextEncoder().encode(s);

describe('sqlite store', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'ferry-sqlite-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('opens the database in WAL mode and keeps data across reopen', async () => {
    const path = join(dir, 'wal.db');
    const s = await SqliteStore.open({ path });
    assert.equal(s.journalMode, 'wal');
    const raw = new Database(path, { readonly: true });
    assert.equal(raw.pragma('page_size', { simple: true }), PAGE_SIZE); // a new file takes ferry's page size
    raw.close();
    await s.ensureGroup('t', 'g', 'latest');
    await s.append([{ id: 'kept', topic: 't', payload: enc('x'), publishedAt: new Date() }]);
    await s.close();
    const again = await SqliteStore.open({ path });
    assert.deepEqual(counts(await again.stats('t', 'g')), { pending: 1, leased: 0, dead: 0 });
    await again.close();
    await assert.rejects(again.stats('t', 'g'), /closed/);
  });

  it('never reuses the seq of a purged message: after the newest are purged, a new one still reaches every group', async () => {
    const path = join(dir, 'seq.db');
    const s = await SqliteStore.open({ path });
    try {
      await s.ensureGroup('t', 'g', 'latest');
      await s.ensureGroup('t', 'h', 'latest');
      await s.append([{ id: 'm1', topic: 't', payload: enc('1'), publishedAt: new Date() }, { id: 'm2', topic: 't', payload: enc('2'), publishedAt: new Date() }]);
      for (const g of ['g', 'h']) await s.ack(await s.claim({ topic: 't', group: g, runnerId: 'r', max: 10, leaseMs: 60_000, maxInFlight: 0 }));
      assert.equal(await s.purge({ ackedRetentionMs: -60_000, deadRetentionMs: 0 }, 100), 2); // the table is empty; both cursors are at m2
      await s.append([{ id: 'm3', topic: 't', payload: enc('3'), publishedAt: new Date() }]);
      const raw = new Database(path, { readonly: true });
      const seqs = raw.prepare(`SELECT seq FROM ferry_messages`).pluck().all() as number[];
      const cursors = raw.prepare(`SELECT cursor_seq FROM ferry_groups`).pluck().all() as number[];
      raw.close();
      assert.ok(seqs[0]! > Math.max(...cursors), `new seq ${seqs[0]} past the cursors ${cursors.join()}`);
      for (const g of ['g', 'h']) {
        const got = await s.claim({ topic: 't', group: g, runnerId: 'r', max: 10, leaseMs: 60_000, maxInFlight: 0 });
        assert.deepEqual(got.map((c) => c.message.id), ['m3'], g);
      }
    } finally {
      await s.close();
    }
  });

  it('loads better-sqlite3 only when the sqlite store is used', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', join(here, 'fixtures', 'lazy-load.ts')], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { before: false, afterMemory: false, afterSqlite: true });
  });

  it('one-message appends from three processes at once each wait for the write lock: every message stored once, seqs 1..N without a gap', async () => {
    // A one-message append is a lone INSERT, not a BEGIN IMMEDIATE
    // transaction: SQLite takes the write lock as the statement starts and
    // waits out the others' (busy timeout), so none fails as busy and no two
    // read the same newest seq.
    const path = join(dir, 'appenders.db');
    const setup = await SqliteStore.open({ path });
    await setup.ensureGroup('t', 'g', 'earliest');
    await setup.close();
    const n = 300;
    const children = ['a', 'b', 'c'].map((prefix) => {
      const child = spawnChild(process.execPath, ['--import', 'tsx', join(here, 'fixtures', 'sqlite-appender.ts'), path, prefix, String(n)], { stdio: ['pipe', 'pipe', 'inherit'] });
      return { child, lines: createInterface({ input: child.stdout! })[Symbol.asyncIterator]() };
    });
    for (const c of children) assert.equal((await c.lines.next()).value, 'ready');
    for (const c of children) c.child.stdin!.write('go\n');
    const said = await Promise.all(children.map(async (c) => (await c.lines.next()).value));
    assert.deepEqual(said, ['done', 'done', 'done']);
    await Promise.all(children.map((c) => new Promise((resolve) => (c.child.exitCode === null ? c.child.once('exit', resolve) : resolve(null)))));
    const db = new Database(path, { readonly: true });
    try {
      const rows = db.prepare('SELECT seq, id FROM ferry_messages ORDER BY seq').all() as Array<{ seq: number; id: string }>;
      assert.deepEqual(rows.map((r) => r.seq), Array.from({ length: 3 * n }, (_, i) => i + 1));
      for (const prefix of ['a', 'b', 'c']) {
        // Each process's messages in the order it appended them.
        const mine = rows.filter((r) => r.id.startsWith(`${prefix}-`)).map((r) => r.id);
        assert.deepEqual(mine, Array.from({ length: n }, (_, i) => `${prefix}-${i}`));
      }
    } finally {
      db.close();
    }
  });

  it('a consumer killed with SIGKILL mid-handler loses nothing: a new one finishes at attempt 2', async () => {
    const path = join(dir, 'crash.db');
    const setup = await SqliteStore.open({ path });
    await setup.ensureGroup('jobs', 'workers', 'latest');
    await setup.close();
    const q = (await createQueue({ enabled: true, type: 'sqlite', config: { path } }))!;
    const ids = await q.publish(...['one', 'two', 'hang', 'four', 'five'].map((t) => ({ topic: 'jobs', payload: enc(t) })));
    await q.close();

    const child = spawnChild(process.execPath, ['--import', 'tsx', join(here, 'fixtures', 'sqlite-consumer.ts'), path], { stdio: ['ignore', 'pipe', 'inherit'] });
    const started: Array<{ id: string; attempt: number; text: string }> = [];
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
    for await (const line of createInterface({ input: child.stdout! })) {
      started.push(JSON.parse(line));
      if (started.at(-1)!.text === 'hang') break;
    }
    child.kill('SIGKILL');
    assert.equal(await exited, 'SIGKILL');
    assert.deepEqual(started.map((s) => [s.text, s.attempt]), [['one', 1], ['two', 1], ['hang', 1]]);

    const q2 = (await createQueue({ enabled: true, type: 'sqlite', config: { path } }))!;
    const left = await q2.stats('jobs', 'workers');
    // 'hang' is still leased by the dead consumer, or pending once that lease has run out.
    assert.deepEqual([left.pending + left.leased, left.dead], [3, 0]);
    const finished: Array<[string, number]> = [];
    try {
      await q2.subscribe('jobs', 'workers', async (d) => void finished.push([new TextDecoder().decode(d.payload), d.attempt]), { pollIntervalMs: 20, concurrency: 1 });
      await waitFor(() => finished.length >= 3, 10_000, 'the three unfinished jobs');
    } finally {
      await q2.close();
    }
    assert.deepEqual(finished.sort(), [['five', 1], ['four', 1], ['hang', 2]]);
    assert.equal(ids.length, 5);
    const s = await SqliteStore.open({ path });
    assert.deepEqual(counts(await s.stats('jobs', 'workers')), { pending: 0, leased: 0, dead: 0 });
    await s.close();
  });
});

it('a SQLite path that cannot be a database is an IOError with the driver error as its cause', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-sqlite-dir-'));
  try {
    const err = await SqliteStore.open({ path: dir }).catch((e: unknown) => e);
    assert.ok(err instanceof IOError);
    assert.equal(err.code, 'ERR_IO');
    assert.ok(err.cause instanceof Error);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
