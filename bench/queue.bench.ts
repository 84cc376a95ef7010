/**
 * Queue benchmarks (suite `queue`), on SQLite and in memory:
 *
 * - `queue.<store>.publish`: messages/s published in batches of 100 (1 KiB
 *   payloads) to a topic with one group. The SQLite figure sits beside a raw
 *   baseline: the same rows inserted with plain better-sqlite3 statements, one
 *   transaction per batch, in the same file system and `synchronous` mode.
 * - `queue.sqlite.publish.single` / `.concurrent64` / `.batch100`: one
 *   producer, 64 producers (one message per call; ratio to `.single`), and
 *   batches of 100 (bench/publish-modes.ts).
 * - `queue.<store>.e2e`: publish → handler → ack at concurrency 16, 1 KiB
 *   payloads, with at most 512 messages outstanding; messages/s, and the
 *   publish-to-handler-finished latency percentiles (ms) in `extra`.
 *
 * The SQLite store runs with its default `synchronous = FULL`: every claim,
 * publish and ack batch is an fsync'd commit.
 */
import { join } from 'node:path';
import hdr from 'hdr-histogram-js';
import { rateFor, withBaseline } from './harness.js';
import { reportPublishModes } from './publish-modes.js';
import type { BenchContext, BenchSuite } from './harness.js';
import { createStoreQueue } from '../src/queue/engine.js';
import { MemoryStore } from '../src/queue/stores/memory.js';
import { SqliteStore } from '../src/queue/stores/sqlite.js';
import type { Message, Queue, Store } from '../src/queue/types.js';

const PAYLOAD = new Uint8Array(1024).fill(7);
const BATCH = 100;

const batchOf = (topic: string, n = BATCH, headers?: Record<string, string>): Message[] =>
  Array.from({ length: n }, () => ({ topic, payload: PAYLOAD, headers }));

async function publishRate(ctx: BenchContext, store: Store): Promise<number> {
  await store.ensureGroup('bench', 'g', 'latest');
  const q = createStoreQueue(store);
  try {
    return await rateFor(Math.max(300, 3000 * ctx.scale), BATCH, async () => {
      await q.publish(...batchOf('bench'));
    });
  } finally {
    await q.close();
  }
}

/** Plain better-sqlite3: the same message and delivery rows, one transaction per batch of 100. */
async function rawSqliteRate(ctx: BenchContext, path: string): Promise<number> {
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec('CREATE TABLE m (seq INTEGER PRIMARY KEY, id TEXT UNIQUE, topic TEXT, payload BLOB, at INTEGER)');
  db.exec('CREATE TABLE d (id TEXT PRIMARY KEY, seq INTEGER, state INTEGER)');
  const insM = db.prepare('INSERT INTO m (id, topic, payload, at) VALUES (?, ?, ?, ?)');
  const insD = db.prepare('INSERT INTO d (id, seq, state) VALUES (?, ?, 0)');
  const buf = Buffer.from(PAYLOAD);
  const tx = db.transaction(() => {
    for (let i = 0; i < BATCH; i++) {
      const id = crypto.randomUUID();
      const r = insM.run(id, 'bench', buf, Date.now());
      insD.run(crypto.randomUUID(), r.lastInsertRowid);
    }
  });
  try {
    return await rateFor(Math.max(300, 3000 * ctx.scale), BATCH, () => tx.immediate());
  } finally {
    db.close();
  }
}

async function endToEnd(ctx: BenchContext, q: Queue): Promise<{ rate: number; extra: Record<string, number> }> {
  const total = Math.max(2000, Math.round(30_000 * ctx.scale));
  const hist = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
  let handled = 0;
  let allDone!: () => void;
  const finished = new Promise<void>((resolve) => (allDone = resolve));
  const sub = await q.subscribe('e2e', 'g', async (d) => {
    const sent = Number(d.headers!.sent);
    hist.recordValue(Math.max(1, Math.round((performance.now() - sent) * 1000))); // µs
    if (++handled === total) allDone();
  }, { concurrency: 16, batchSize: 32 });
  const start = performance.now();
  let published = 0;
  while (published < total) {
    if (published - handled >= 512) {
      await new Promise((r) => setTimeout(r, 1));
      continue;
    }
    const n = Math.min(BATCH, total - published);
    await q.publish(...batchOf('e2e', n, { sent: String(performance.now()) }));
    published += n;
  }
  await finished;
  // Acks of the last handlers are written after they return: wait for them before stopping the clock.
  while ((await q.stats('e2e', 'g')).leased > 0) await new Promise((r) => setTimeout(r, 1));
  const seconds = (performance.now() - start) / 1000;
  await sub.close();
  const extra = {
    p50_ms: hist.getValueAtPercentile(50) / 1000,
    p99_ms: hist.getValueAtPercentile(99) / 1000,
    messages: total,
  };
  hist.destroy();
  return { rate: total / seconds, extra };
}

export const suite: BenchSuite = {
  name: 'queue',
  async run(ctx) {
    const baseline = await rawSqliteRate(ctx, join(ctx.tmpDir, 'raw.db'));
    const sqlitePublish = await publishRate(ctx, await SqliteStore.open({ path: join(ctx.tmpDir, 'publish.db') }));
    ctx.report(withBaseline('queue.sqlite.publish', 'msgs/s', sqlitePublish, baseline));
    await reportPublishModes(ctx, 'queue.sqlite.publish', async (tag) => {
      const store = await SqliteStore.open({ path: join(ctx.tmpDir, `publish-${tag}.db`) });
      await store.ensureGroup('bench', 'g', 'latest');
      return createStoreQueue(store);
    });

    const sq = createStoreQueue(await SqliteStore.open({ path: join(ctx.tmpDir, 'e2e.db') }));
    try {
      const e = await endToEnd(ctx, sq);
      ctx.report({ name: 'queue.sqlite.e2e', unit: 'msgs/s', value: e.rate, extra: e.extra });
    } finally {
      await sq.close();
    }

    ctx.report({ name: 'queue.memory.publish', unit: 'msgs/s', value: await publishRate(ctx, new MemoryStore()) });
    const mq = createStoreQueue(new MemoryStore());
    try {
      const e = await endToEnd(ctx, mq);
      ctx.report({ name: 'queue.memory.e2e', unit: 'msgs/s', value: e.rate, extra: e.extra });
    } finally {
      await mq.close();
    }
  },
};
