/**
 * The per-key FIFO workload's store calls on Postgres, without the engine:
 * `node --import tsx bench/postgres-lanes.ts [keymajor|interleaved] [explain]`
 * publishes 1,000 keys × 50 messages of 1 KiB (batches of 100, not timed)
 * on a fresh schema, then drains them with one claim of 128 followed by
 * `ackAndClaim` of each batch it got, one call at a time, and prints the
 * steps, the milliseconds per step and the rate. This is the bound the
 * engine's poll loop works under on the `keyfifo` rows of `npm run
 * bench:peers` (one consumer, batches of 128).
 *
 * With `explain`, each store connection loads auto_explain (superuser
 * only) and the first 30 steps log their plans with timings to the
 * server's log: the split of a step between the lane walk, the lane
 * probes, the locks, the lease and the lane triggers.
 *
 * FERRY_TEST_POSTGRES_URL names the server (default postgres://localhost/test).
 */
import pg from 'pg';
import { dropLeftoverSchemas } from './leftovers.js';
import { poolConfig } from '../src/queue/stores/postgres/connection.js';
import { PostgresStore } from '../src/queue/stores/postgres/store.js';
import type { StoredMessage } from '../src/queue/types.js';

const KEYS = 1000;
const PER_KEY = 50;
const BATCH = 128;
const EXPLAINED_STEPS = 30;

const order = process.argv[2] === 'interleaved' ? 'interleaved' : 'keymajor';
const explain = process.argv[3] === 'explain';
const url = poolConfig(pg, process.env.FERRY_TEST_POSTGRES_URL || 'postgres://localhost/test', 2).connectionString!;
const schema = `ferry_bench_lanes_${process.pid}`;
const pool = new pg.Pool({ connectionString: url, max: 2 });
if (explain) {
  pool.on('connect', (c) => {
    void c.query(
      `LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on;
       SET auto_explain.log_buffers = on; SET auto_explain.log_nested_statements = on`,
    );
  });
}

const keys: string[] = [];
if (order === 'keymajor') for (let k = 0; k < KEYS; k++) for (let q = 0; q < PER_KEY; q++) keys.push(`k${k}`);
else for (let q = 0; q < PER_KEY; q++) for (let k = 0; k < KEYS; k++) keys.push(`k${k}`);

await dropLeftoverSchemas(pool);
const store = await PostgresStore.open({ pool, schema });
try {
  await store.ensureGroup('t', 'g', 'earliest');
  for (let i = 0; i < keys.length; i += 100) {
    const batch: StoredMessage[] = keys.slice(i, i + 100).map((key, j) => ({ id: `m${i + j}`, topic: 't', key, payload: new Uint8Array(1024), publishedAt: new Date() }));
    await store.append(batch);
  }
  const req = { topic: 't', group: 'g', runnerId: 'bench', max: BATCH, leaseMs: 60_000, maxInFlight: 0 };
  const start = performance.now();
  let held = await store.claim(req);
  let done = held.length;
  let steps = 0;
  while (held.length > 0 && !(explain && steps >= EXPLAINED_STEPS)) {
    held = (await store.ackAndClaim(held, req)).claimed;
    done += held.length;
    steps++;
  }
  const ms = performance.now() - start;
  console.log(JSON.stringify({ order, steps, messages: done, ms: Math.round(ms), msPerStep: +(ms / Math.max(steps, 1)).toFixed(2), msgsPerS: Math.round((done * 1000) / ms) }));
} finally {
  await store.close();
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
}
