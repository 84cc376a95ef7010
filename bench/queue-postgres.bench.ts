/**
 * Postgres queue benchmarks (suite `queue.postgres`), against
 * FERRY_BENCH_POSTGRES_URL (default postgres://localhost/test), each in a
 * schema of its own that is dropped afterwards:
 *
 * - `queue.postgres.publish`: messages/s published in batches of 100 (1 KiB)
 *   to a topic with one group, beside a raw baseline: the same message and
 *   delivery rows inserted with plain `pg`, one transaction per batch.
 * - `queue.postgres.publish.single` / `.concurrent64` / `.batch100`: one
 *   producer, 64 producers (one message per call; ratio to `.single`), and
 *   batches of 100 (bench/publish-modes.ts).
 * - `queue.postgres.e2e.1` / `.e2e.4`: publish → handler → ack, 1 KiB, with 1
 *   and 4 instances (each its own store and pool, concurrency 16 each) in
 *   this process; messages/s and publish-to-handled p50/p99 (ms).
 * - `queue.postgres.e2e.keyed1` / `.e2e.keyed1000.interleaved`: `e2e.1` with
 *   every message on one key (1,000 messages, run one at a time), then with
 *   1,000 keys × 20 messages published round-robin (`--quick`: 100 keys);
 *   ratio to `e2e.1` of the same run. Default `pollIntervalMs` (1 s): the
 *   next message of a key must be claimable as soon as its head is acked.
 * - `queue.postgres.e2e.prefetch.1` / `.4`: the same with `batchSize: 128,
 *   prefetch: 256` (claims fetch beyond the free slots).
 * - `queue.postgres.drain` / `.drain.prefetch`: 20,000 × 1 KiB published
 *   first, then consumed by one instance with concurrency 16 (default
 *   options, then `batchSize: 128, prefetch: 256`); messages/s from subscribe
 *   to the last ack written: the measure the first job-queue comparison
 *   (graphile-worker, BullMQ, pg-boss) used.
 * - `queue.postgres.claim.0` / `.claim.1m`: deliveries/s through
 *   `Store.claim` (32 at a time) and `Store.ack` on one instance, with only
 *   the rows being consumed pending, then with 1,000,000 pending and
 *   1,000,000 finished rows (`--quick`: 100,000), loaded straight through
 *   SQL, vacuumed and checkpointed before the claims run.
 * - `queue.postgres.claim.1m.priorities10`: `.claim.1m` with the pending
 *   rows spread over 10 priorities in turn (each claim takes the top
 *   priority's first rows); ratio to `.claim.1m` of the same run (aim: at
 *   least 1/1.2, the claim reads its rows off the index in claim order
 *   either way). `FERRY_BENCH_CLAIM_ROWS` sets the pending and finished
 *   rows of both (default 1,000,000; `--quick`: a tenth).
 */
import { userInfo } from 'node:os';
import hdr from 'hdr-histogram-js';
import pg from 'pg';
import { rateFor, withBaseline } from './harness.js';
import type { BenchContext, BenchSuite } from './harness.js';
import { dropLeftoverSchemas } from './leftovers.js';
import { fillSchema } from './postgres-fill.js';
import { reportPublishModes } from './publish-modes.js';
import { createStoreQueue } from '../src/queue/engine.js';
import { PostgresStore } from '../src/queue/stores/postgres/store.js';
import type { SubscribeOptions } from '../src/queue/options.js';
import type { Message, Queue } from '../src/queue/types.js';

const URL = process.env.FERRY_BENCH_POSTGRES_URL || 'postgres://localhost/test';
const PAYLOAD = new Uint8Array(1024).fill(7);
const BATCH = 100;

const batchOf = (topic: string, n = BATCH, headers?: Record<string, string>): Message[] =>
  Array.from({ length: n }, () => ({ topic, payload: PAYLOAD, headers }));

let schemas = 0;
const schemaName = (tag: string) => `ferry_bench_${tag}_${process.pid}_${++schemas}`;

async function publishRate(ctx: BenchContext, admin: pg.Pool): Promise<number> {
  const schema = schemaName('pub');
  const store = await PostgresStore.open({ connectionString: URL, schema });
  await store.ensureGroup('bench', 'g', 'latest');
  const q = createStoreQueue(store);
  try {
    return await rateFor(Math.max(1000, 5000 * ctx.scale), BATCH, () => q.publish(...batchOf('bench')).then(() => undefined));
  } finally {
    await q.close();
    await admin.query(`DROP SCHEMA "${schema}" CASCADE`);
  }
}

/** Plain pg: a message row and a delivery row per message, one transaction per batch of 100. */
async function rawRate(ctx: BenchContext, admin: pg.Pool): Promise<number> {
  const schema = schemaName('raw');
  await admin.query(`CREATE SCHEMA "${schema}"`);
  await admin.query(`CREATE TABLE "${schema}".m (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id text UNIQUE, topic text, payload bytea, at timestamptz)`);
  await admin.query(`CREATE TABLE "${schema}".d (id text PRIMARY KEY, seq bigint, state smallint)`);
  const client = await admin.connect();
  const buf = Buffer.from(PAYLOAD);
  try {
    return await rateFor(Math.max(1000, 5000 * ctx.scale), BATCH, async () => {
      const ids = Array.from({ length: BATCH }, () => crypto.randomUUID());
      await client.query('BEGIN');
      await client.query(
        `WITH m AS (INSERT INTO "${schema}".m (id, topic, payload, at) SELECT id, 'bench', $2, now() FROM unnest($1::text[]) id RETURNING seq, id)
         INSERT INTO "${schema}".d (id, seq, state) SELECT m.id || '/g', m.seq, 0 FROM m`,
        [ids, buf],
      );
      await client.query('COMMIT');
    });
  } finally {
    client.release();
    await admin.query(`DROP SCHEMA "${schema}" CASCADE`);
  }
}

/** Options of the tuned rows: claims fetch well beyond the 16 slots. */
const TUNED: SubscribeOptions = { concurrency: 16, batchSize: 128, prefetch: 256 };

/** Keyed rows: how many messages, and the key of the i-th. */
interface KeyedShape {
  total: number;
  keyOf: (i: number) => string;
}

async function endToEnd(ctx: BenchContext, admin: pg.Pool, instances: number, opts: SubscribeOptions = { concurrency: 16, batchSize: 32 }, keyed?: KeyedShape): Promise<{ rate: number; extra: Record<string, number> }> {
  const schema = schemaName('e2e');
  const queues: Queue[] = [];
  for (let i = 0; i < instances; i++) queues.push(createStoreQueue(await PostgresStore.open({ connectionString: URL, schema })));
  const total = keyed?.total ?? Math.max(2000, Math.round(20_000 * ctx.scale));
  const hist = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
  let handled = 0;
  let allDone!: () => void;
  const finished = new Promise<void>((resolve) => (allDone = resolve));
  try {
    for (const q of queues) {
      await q.subscribe('e2e', 'g', async (d) => {
        hist.recordValue(Math.max(1, Math.round((performance.now() - Number(d.headers!.sent)) * 1000))); // µs
        if (++handled === total) allDone();
      }, opts);
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
      const batch = batchOf('e2e', n, { sent: String(performance.now()) });
      if (keyed) batch.forEach((m, j) => (m.key = keyed.keyOf(published + j)));
      await producer.publish(...batch);
      published += n;
    }
    await finished;
    while ((await producer.stats('e2e', 'g')).leased > 0) await new Promise((r) => setTimeout(r, 1));
    const seconds = (performance.now() - start) / 1000;
    return { rate: total / seconds, extra: { p50_ms: hist.getValueAtPercentile(50) / 1000, p99_ms: hist.getValueAtPercentile(99) / 1000, messages: total } };
  } finally {
    hist.destroy();
    for (const q of queues) await q.close({ timeoutMs: 1000 });
    await admin.query(`DROP SCHEMA "${schema}" CASCADE`);
  }
}

/** Publishes `total` messages, then times one instance consuming them all (acks written). */
async function drain(ctx: BenchContext, admin: pg.Pool, opts: SubscribeOptions): Promise<number> {
  const schema = schemaName('drain');
  const store = await PostgresStore.open({ connectionString: URL, schema });
  await store.ensureGroup('drain', 'g', 'latest');
  const q = createStoreQueue(store);
  const total = Math.max(2000, Math.round(20_000 * ctx.scale));
  try {
    for (let published = 0; published < total; published += BATCH) await q.publish(...batchOf('drain', Math.min(BATCH, total - published)));
    let handled = 0;
    let allDone!: () => void;
    const finished = new Promise<void>((resolve) => (allDone = resolve));
    const start = performance.now();
    const sub = await q.subscribe('drain', 'g', async () => {
      if (++handled === total) allDone();
    }, opts);
    await finished;
    await sub.close(); // waits for the last acks to be written
    return total / ((performance.now() - start) / 1000);
  } finally {
    await q.close({ timeoutMs: 1000 });
    await admin.query(`DROP SCHEMA "${schema}" CASCADE`);
  }
}

/** Deliveries/s through claim (32) and ack on one instance over `backlog` pending rows spread over `priorities` and `finished` acked ones; exported for running alone (`bench/claim-priorities.ts`). */
export async function claimRate(ctx: BenchContext, admin: pg.Pool, backlog: number, finished: number, priorities = 1): Promise<number> {
  const schema = schemaName('claim');
  const store = await PostgresStore.open({ connectionString: URL, schema, poolSize: 2 });
  try {
    await fillSchema(admin, schema, 't', 'g', backlog, finished, 4, priorities);
    // As a server's autovacuum would after a bulk load (this one may run
    // without it): the claims are not charged for setting the hint bits of
    // rows they never loaded, which costs in proportion to the pages a claim
    // touches, not to its work. Then a checkpoint: the fill's WAL would
    // otherwise start one while the claims run, unevenly between rows.
    await admin.query(`VACUUM "${schema}".deliveries, "${schema}".messages`);
    await admin.query('CHECKPOINT').catch(() => undefined); // needs pg_checkpoint or superuser: best effort
    return await rateFor(Math.max(1000, 4000 * ctx.scale), 32, async () => {
      const cs = await store.claim({ topic: 't', group: 'g', runnerId: 'bench', max: 32, leaseMs: 60_000, maxInFlight: 0 });
      if (cs.length < 32) throw new Error('claim benchmark ran out of pending rows');
      await store.ack(cs);
    });
  } finally {
    await store.close();
    await admin.query(`DROP SCHEMA "${schema}" CASCADE`);
  }
}

export const suite: BenchSuite = {
  name: 'queue.postgres',
  async run(ctx) {
    if (!process.env.PGUSER && !process.env.USER) process.env.PGUSER = userInfo().username;
    const admin = new pg.Pool({ connectionString: URL, max: 2 });
    try {
      await admin.query('SELECT 1');
    } catch (err) {
      await admin.end();
      process.stderr.write(`queue.postgres: skipped, PostgreSQL at ${URL} is unreachable (${(err as Error).message})\n`);
      return;
    }
    await dropLeftoverSchemas(admin);
    try {
      const baseline = await rawRate(ctx, admin);
      ctx.report(withBaseline('queue.postgres.publish', 'msgs/s', await publishRate(ctx, admin), baseline));
      const modeSchemas: string[] = [];
      try {
        await reportPublishModes(ctx, 'queue.postgres.publish', async (tag) => {
          const schema = schemaName(`pub_${tag}`);
          modeSchemas.push(schema);
          const store = await PostgresStore.open({ connectionString: URL, schema });
          await store.ensureGroup('bench', 'g', 'latest');
          return createStoreQueue(store);
        });
      } finally {
        for (const schema of modeSchemas) await admin.query(`DROP SCHEMA "${schema}" CASCADE`);
      }
      for (const n of [1, 4]) {
        const e = await endToEnd(ctx, admin, n);
        ctx.report({ name: `queue.postgres.e2e.${n}`, unit: 'msgs/s', value: e.rate, extra: e.extra });
        if (n !== 1) continue;
        const keys = Math.max(100, Math.round(1000 * ctx.scale));
        const one = await endToEnd(ctx, admin, 1, undefined, { total: 1000, keyOf: () => 'k' });
        ctx.report(withBaseline('queue.postgres.e2e.keyed1', 'msgs/s', one.rate, e.rate, one.extra));
        const many = await endToEnd(ctx, admin, 1, undefined, { total: keys * 20, keyOf: (i) => `k${i % keys}` });
        ctx.report(withBaseline('queue.postgres.e2e.keyed1000.interleaved', 'msgs/s', many.rate, e.rate, many.extra));
      }
      for (const n of [1, 4]) {
        const e = await endToEnd(ctx, admin, n, TUNED);
        ctx.report({ name: `queue.postgres.e2e.prefetch.${n}`, unit: 'msgs/s', value: e.rate, extra: e.extra });
      }
      ctx.report({ name: 'queue.postgres.drain', unit: 'msgs/s', value: await drain(ctx, admin, { concurrency: 16 }) });
      ctx.report({ name: 'queue.postgres.drain.prefetch', unit: 'msgs/s', value: await drain(ctx, admin, TUNED) });
      const big = Math.round(Number(process.env.FERRY_BENCH_CLAIM_ROWS ?? 1_000_000) * ctx.scale);
      ctx.report({ name: 'queue.postgres.claim.0', unit: 'msgs/s', value: await claimRate(ctx, admin, Math.round(100_000 * ctx.scale), 0), extra: { pending: Math.round(100_000 * ctx.scale), finished: 0 } });
      const flat = await claimRate(ctx, admin, big, big);
      ctx.report({ name: 'queue.postgres.claim.1m', unit: 'msgs/s', value: flat, extra: { pending: big, finished: big } });
      const spread = await claimRate(ctx, admin, big, big, 10);
      ctx.report(withBaseline('queue.postgres.claim.1m.priorities10', 'msgs/s', spread, flat, { pending: big, finished: big, priorities: 10 }));
    } finally {
      await admin.end();
    }
  },
};
