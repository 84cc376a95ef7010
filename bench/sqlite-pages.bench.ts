/**
 * Pages per commit on the SQLite store (suite `sqlite-pages`): at
 * `synchronous = FULL` every commit appends its dirty pages to the WAL and
 * fsyncs it, so the pages a commit writes, and how many commits a message
 * costs, are what one-at-a-time work pays for beside the fsync itself.
 * Counted, not timed: the WAL is emptied (`wal_checkpoint(TRUNCATE)` from a
 * second connection), the work runs, and the frames the WAL then holds are
 * read back: each frame is one page, a commit frame ends a transaction, and
 * `dbstat` names the table or index each page belongs to (in `extra`).
 *
 * - `sqlite-pages.publish.single`: pages per commit of 100 publishes of one
 *   1 KiB message each, beside a raw baseline: one row per commit into a
 *   table with one secondary index (the shape of plainjob's jobs table), at
 *   SQLite's default 4 KiB page.
 * - `sqlite-pages.keyed1.commits` / `.pages`: commits and pages per message
 *   consumed from one key lane (100 messages), where every message waits for
 *   the ack of the one before it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { withBaseline } from './harness.js';
import type { BenchSuite } from './harness.js';
import { createStoreQueue } from '../src/queue/engine.js';
import { SqliteStore } from '../src/queue/stores/sqlite/store.js';

const N = 100;
const PAYLOAD = new Uint8Array(1024).fill(7);

/** Reads the WAL of the database at `path` through a second connection. */
function walReader(path: string) {
  const side = new Database(path);
  const pageSize = side.pragma('page_size', { simple: true }) as number;
  return {
    reset: () => void side.pragma('wal_checkpoint(TRUNCATE)'),
    /** Frames and commits since the last reset, and the frames per table or index. */
    read() {
      const owners = new Map<number, string>();
      for (const r of side.prepare('SELECT name, pageno FROM dbstat').all() as Array<{ name: string; pageno: number }>) owners.set(r.pageno, r.name);
      const wal = readFileSync(`${path}-wal`);
      const by: Record<string, number> = {};
      let frames = 0;
      let commits = 0;
      for (let off = 32; off + 24 + pageSize <= wal.length; off += 24 + pageSize) {
        const page = wal.readUInt32BE(off);
        if (wal.readUInt32BE(off + 4) !== 0) commits++; // a commit frame records the database size
        frames++;
        const owner = owners.get(page) ?? `page ${page}`;
        by[owner] = (by[owner] ?? 0) + 1;
      }
      return { frames, commits, by, kib: (frames * pageSize) / 1024 };
    },
    close: () => side.close(),
  };
}

export const suite: BenchSuite = {
  name: 'sqlite-pages',
  async run(ctx) {
    // Raw baseline: one row per commit, one secondary index, 4 KiB pages.
    const rawPath = join(ctx.tmpDir, 'pages-raw.db');
    const raw = new Database(rawPath);
    raw.pragma('journal_mode = WAL');
    raw.pragma('synchronous = FULL');
    raw.exec('CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, type TEXT, data BLOB, status INTEGER, next_run_at INTEGER)');
    raw.exec('CREATE INDEX jobs_due ON jobs (status, type, next_run_at)');
    const ins = raw.prepare('INSERT INTO jobs (type, data, status, next_run_at) VALUES (?, ?, 0, ?)');
    const rawWal = walReader(rawPath);
    const rawInsert = () => raw.transaction(() => ins.run('bench', Buffer.from(PAYLOAD), Date.now())).immediate();
    for (let i = 0; i < 200; i++) rawInsert();
    rawWal.reset();
    for (let i = 0; i < N; i++) rawInsert();
    const base = rawWal.read();
    rawWal.close();
    raw.close();

    const path = join(ctx.tmpDir, 'pages.db');
    const q = createStoreQueue(await SqliteStore.open({ path }), { onError: () => {} });
    const wal = walReader(path);
    try {
      await (await q.subscribe('bench', 'g', async () => {}, { startFrom: 'earliest' })).close();
      for (let i = 0; i < 20; i++) await q.publish(...Array.from({ length: 100 }, () => ({ topic: 'warm', payload: PAYLOAD })));
      wal.reset();
      for (let i = 0; i < N; i++) await q.publish({ topic: 'bench', payload: PAYLOAD });
      const pub = wal.read();
      ctx.report(withBaseline('sqlite-pages.publish.single', 'pages/commit', pub.frames / pub.commits, base.frames / base.commits, {
        kib_per_commit: pub.kib / pub.commits, baseline_kib_per_commit: base.kib / base.commits, ...pub.by,
      }));

      await (await q.subscribe('lane', 'g', async () => {}, { startFrom: 'earliest' })).close();
      await q.publish(...Array.from({ length: N }, () => ({ topic: 'lane', key: 'k', payload: PAYLOAD })));
      wal.reset();
      let handled = 0;
      let done!: () => void;
      const finished = new Promise<void>((resolve) => (done = resolve));
      const sub = await q.subscribe('lane', 'g', async () => {
        if (++handled === N) done();
      }, { concurrency: 16 });
      await finished;
      while ((await q.stats('lane', 'g')).leased > 0) await new Promise((r) => setTimeout(r, 1));
      await sub.close();
      const k = wal.read();
      ctx.report({ name: 'sqlite-pages.keyed1.commits', unit: 'commits/msg', value: k.commits / N, extra: { messages: N } });
      ctx.report({ name: 'sqlite-pages.keyed1.pages', unit: 'pages/msg', value: k.frames / N, extra: { kib_per_msg: k.kib / N, ...k.by } });
    } finally {
      wal.close();
      await q.close();
    }
  },
};
