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
 * - `queue.<store>.e2e.keyed1`: the same with every message on one key
 *   (1,000 messages), so they run one at a time in publish order.
 * - `queue.<store>.e2e.keyed1000.keymajor` / `.interleaved`: 1,000 keys × 20
 *   messages (`--quick`: 100 keys), published key by key (all 20 of a key,
 *   then the next key) or round-robin across keys.
 *
 * Every keyed row reports its ratio to the unkeyed `e2e` row of the same
 * store in the same run. All rows use the default `pollIntervalMs` (1 s):
 * a keyed message must become claimable as soon as the one before it on its
 * key is acked, so the poll interval should not show in the figures.
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
import { SqliteStore } from '../src/queue/stores/sqlite/store.js';
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

/** Which key, if any, the i-th of `total` messages gets. */
type KeyOf = (i: number, total: number) => string | undefined;

/** The keyed rows: name suffix, message count and key of each message. */
function keyedShapes(ctx: BenchContext): Array<{ name: string; total: number; keyOf: KeyOf }> {
  const keys = Math.max(100, Math.round(1000 * ctx.scale));
  const perKey = 20;
  return [
    { name: 'keyed1', total: 1000, keyOf: () => 'k' },
    { name: 'keyed1000.keymajor', total: keys * perKey, keyOf: (i) => `k${Math.floor(i / perKey)}` },
    { name: 'keyed1000.interleaved', total: keys * perKey, keyOf: (i) => `k${i % keys}` },
  ];
}

async function endToEnd(ctx: BenchContext, q: Queue, topic = 'e2e', total = Math.max(2000, Math.round(30_000 * ctx.scale)), keyOf?: KeyOf): Promise<{ rate: number; extra: Record<string, number> }> {
  const hist = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
  let handled = 0;
  let allDone!: () => void;
  const finished = new Promise<void>((resolve) => (allDone = resolve));
  const sub = await q.subscribe(topic, 'g', async (d) => {
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
    const batch = batchOf(topic, n, { sent: String(performance.now()) });
    if (keyOf) batch.forEach((m, j) => (m.key = keyOf(published + j, total)));
    await q.publish(...batch);
    published += n;
  }
  await finished;
  // Acks of the last handlers are written after they return: wait for them before stopping the clock.
  while ((await q.stats(topic, 'g')).leased > 0) await new Promise((r) => setTimeout(r, 1));
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

/** The unkeyed `e2e` row of a store, then its keyed rows with their ratio to it; each on a topic of its own. */
async function endToEndRows(ctx: BenchContext, store: string, open: () => Promise<Queue>): Promise<void> {
  const q = await open();
  try {
    const e = await endToEnd(ctx, q);
    ctx.report({ name: `queue.${store}.e2e`, unit: 'msgs/s', value: e.rate, extra: e.extra });
    for (const shape of keyedShapes(ctx)) {
      const k = await endToEnd(ctx, q, `e2e-${shape.name}`, shape.total, shape.keyOf);
      ctx.report(withBaseline(`queue.${store}.e2e.${shape.name}`, 'msgs/s', k.rate, e.rate, k.extra));
    }
  } finally {
    await q.close();
  }
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

    await endToEndRows(ctx, 'sqlite', async () => createStoreQueue(await SqliteStore.open({ path: join(ctx.tmpDir, 'e2e.db') })));

    ctx.report({ name: 'queue.memory.publish', unit: 'msgs/s', value: await publishRate(ctx, new MemoryStore()) });
    await endToEndRows(ctx, 'memory', async () => createStoreQueue(new MemoryStore()));
  },
};
