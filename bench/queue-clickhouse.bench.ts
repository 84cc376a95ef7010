/**
 * ClickHouse queue benchmarks (suite `queue.clickhouse`), against
 * FERRY_BENCH_CLICKHOUSE_URL (default http://127.0.0.1:18123, where .ci/run
 * and the tests start Debian's 18.16 server), each in a database of its own
 * that is dropped afterwards:
 *
 * - `queue.clickhouse.publish`: messages/s published in batches of 100
 *   (1 KiB) to a topic with one group, beside a raw baseline: the same
 *   message and delivery rows written with two plain INSERTs per batch.
 * - `queue.clickhouse.e2e.1`: publish → handler → ack, 1 KiB, one instance
 *   (concurrency 16) with a `ProcessLocker`; messages/s and
 *   publish-to-handled p50/p99 (ms).
 * - `queue.clickhouse.e2e.2.redis`: the same with 2 instances in this process
 *   sharing a `RedisLocker` (FERRY_BENCH_REDIS_URL, default
 *   redis://127.0.0.1:6379); skipped when Redis is unreachable.
 */
import { createClient } from '@clickhouse/client';
import type { ClickHouseClient } from '@clickhouse/client';
import hdr from 'hdr-histogram-js';
import { rateFor, withBaseline } from './harness.js';
import { dropEach, leftovers } from './leftovers.js';
import type { BenchContext, BenchSuite } from './harness.js';
import { createStoreQueue } from '../src/queue/engine.js';
import { ProcessLocker } from '../src/queue/lockers/process.js';
import { RedisLocker } from '../src/queue/lockers/redis.js';
import type { DistributedLocker } from '../src/queue/lockers/types.js';
import { ClickHouseStore } from '../src/queue/stores/clickhouse/store.js';
import { bytesLiteral } from '../src/queue/stores/clickhouse/escape.js';
import type { Message, Queue } from '../src/queue/types.js';

const URL = process.env.FERRY_BENCH_CLICKHOUSE_URL || 'http://127.0.0.1:18123';
const REDIS_URL = process.env.FERRY_BENCH_REDIS_URL || 'redis://127.0.0.1:6379';
const PAYLOAD = new Uint8Array(1024).fill(7);
const BATCH = 100;

const batchOf = (topic: string, n = BATCH, headers?: Record<string, string>): Message[] =>
  Array.from({ length: n }, () => ({ topic, payload: PAYLOAD, headers }));

/**
 * Drops the bench databases whose process is gone (bench/leftovers.ts), when
 * the server is on this host.
 */
async function dropLeftoverDatabases(admin: ClickHouseClient): Promise<void> {
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(new globalThis.URL(URL).hostname)) return;
  const res = await admin.query({ query: `SELECT name FROM system.databases WHERE startsWith(name, 'ferry_bench_')`, format: 'JSONEachRow' });
  const gone = leftovers(((await res.json()) as { name: string }[]).map((r) => r.name));
  await dropEach('database', gone, (name) => admin.command({ query: `DROP DATABASE IF EXISTS ${name}` }));
}

let dbs = 0;
const dbName = (tag: string) => `ferry_bench_${tag}_${process.pid}_${++dbs}`;

async function publishRate(ctx: BenchContext, admin: ClickHouseClient): Promise<number> {
  const database = dbName('pub');
  const store = await ClickHouseStore.open({ url: URL, database, locker: new ProcessLocker() });
  await store.ensureGroup('bench', 'g', 'latest');
  const q = createStoreQueue(store);
  try {
    return await rateFor(Math.max(1000, 5000 * ctx.scale), BATCH, () => q.publish(...batchOf('bench')).then(() => undefined));
  } finally {
    await q.close();
    await admin.command({ query: `DROP DATABASE IF EXISTS ${database}` });
  }
}

/** Plain inserts: a message row and a delivery row per message, two INSERTs per batch of 100, no locks or reads. */
async function rawRate(ctx: BenchContext, admin: ClickHouseClient): Promise<number> {
  const database = dbName('raw');
  await admin.command({ query: `CREATE DATABASE ${database}` });
  await admin.command({ query: `CREATE TABLE ${database}.m (topic String, id String, seq UInt64, payload String, at UInt64) ENGINE = MergeTree ORDER BY (topic, id)` });
  await admin.command({ query: `CREATE TABLE ${database}.d (topic String, id String, seq UInt64, state UInt8) ENGINE = MergeTree ORDER BY (topic, id)` });
  const payload = bytesLiteral(PAYLOAD);
  let seq = 0;
  try {
    return await rateFor(Math.max(1000, 5000 * ctx.scale), BATCH, async () => {
      const rows = Array.from({ length: BATCH }, () => [crypto.randomUUID(), ++seq] as const);
      await admin.command({ query: `INSERT INTO ${database}.d (topic, id, seq, state) VALUES ${rows.map(([id, s]) => `('bench', '${id}/g', ${s}, 0)`).join(',')}` });
      await admin.command({ query: `INSERT INTO ${database}.m (topic, id, seq, payload, at) VALUES ${rows.map(([id, s]) => `('bench', '${id}', ${s}, ${payload}, ${Date.now()})`).join(',')}` });
    });
  } finally {
    await admin.command({ query: `DROP DATABASE IF EXISTS ${database}` });
  }
}

async function endToEnd(ctx: BenchContext, admin: ClickHouseClient, instances: number, locker: DistributedLocker): Promise<{ rate: number; extra: Record<string, number> }> {
  const database = dbName('e2e');
  const queues: Queue[] = [];
  for (let i = 0; i < instances; i++) queues.push(createStoreQueue(await ClickHouseStore.open({ url: URL, database, locker })));
  const total = Math.max(1000, Math.round(5000 * ctx.scale));
  const hist = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
  let handled = 0;
  let allDone!: () => void;
  const finished = new Promise<void>((resolve) => (allDone = resolve));
  try {
    for (const q of queues) {
      await q.subscribe('e2e', 'g', async (d) => {
        hist.recordValue(Math.max(1, Math.round((performance.now() - Number(d.headers!.sent)) * 1000))); // µs
        if (++handled === total) allDone();
      }, { concurrency: 16, batchSize: 32, pollIntervalMs: 50 });
    }
    const producer = queues[0]!;
    const start = performance.now();
    let published = 0;
    while (published < total) {
      if (published - handled >= 1024) {
        await new Promise((r) => setTimeout(r, 1));
        continue;
      }
      const n = Math.min(BATCH, total - published);
      await producer.publish(...batchOf('e2e', n, { sent: String(performance.now()) }));
      published += n;
    }
    await finished;
    while ((await producer.stats('e2e', 'g')).leased > 0) await new Promise((r) => setTimeout(r, 5));
    const seconds = (performance.now() - start) / 1000;
    return { rate: total / seconds, extra: { p50_ms: hist.getValueAtPercentile(50) / 1000, p99_ms: hist.getValueAtPercentile(99) / 1000, messages: total } };
  } finally {
    hist.destroy();
    for (const q of queues) await q.close({ timeoutMs: 1000 });
    await admin.command({ query: `DROP DATABASE IF EXISTS ${database}` });
  }
}

export const suite: BenchSuite = {
  name: 'queue.clickhouse',
  async run(ctx) {
    const admin = createClient({ url: URL, log: { level: 127 } });
    const ping = await admin.ping();
    if (!ping.success) {
      await admin.close();
      process.stderr.write(`queue.clickhouse: skipped, ClickHouse at ${URL} is unreachable\n`);
      return;
    }
    try {
      await dropLeftoverDatabases(admin);
      const baseline = await rawRate(ctx, admin);
      ctx.report(withBaseline('queue.clickhouse.publish', 'msgs/s', await publishRate(ctx, admin), baseline));
      const e = await endToEnd(ctx, admin, 1, new ProcessLocker());
      ctx.report({ name: 'queue.clickhouse.e2e.1', unit: 'msgs/s', value: e.rate, extra: e.extra });
      let redis: RedisLocker | undefined;
      try {
        redis = await RedisLocker.open({ url: REDIS_URL, prefix: `ferry-bench:${process.pid}:` });
      } catch (err) {
        process.stderr.write(`queue.clickhouse.e2e.2.redis: skipped, Redis at ${REDIS_URL} is unreachable (${(err as Error).message})\n`);
      }
      if (redis) {
        try {
          const r = await endToEnd(ctx, admin, 2, redis);
          ctx.report({ name: 'queue.clickhouse.e2e.2.redis', unit: 'msgs/s', value: r.rate, extra: r.extra });
        } finally {
          await redis.close();
        }
      }
    } finally {
      await admin.close();
    }
  },
};
