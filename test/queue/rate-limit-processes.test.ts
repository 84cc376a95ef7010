/**
 * A rate limit across processes: 3 worker processes consume one group on
 * one Postgres schema with `rateLimit: { max: 50, intervalMs: 1000 }`, 500
 * messages (about 10 s at the limit). Checked from what was recorded, never
 * from how long anything took:
 *
 * - the claims: a trigger logs each delivery a claim takes with the claim's
 *   instant on the database clock (test/helpers/pg-claim-log.ts). Every
 *   1-second window of those instants holds at most 50: the limit itself.
 * - the handler starts: each worker logs Date.now() as a handler begins. A
 *   start lags its claim by the claim-to-handler latency (the reply, the
 *   engine handing it to a handler), which varies, so a 1-second window of
 *   starts may hold starts of claims from a longer span. With every lag
 *   between `minLag` and `maxLag` (as observed, per delivery), the starts
 *   in any window [a, a + W) were claimed within [a − maxLag, a + W −
 *   minLag), a window of W + (maxLag − minLag); so windows of W = 1000 ms −
 *   (maxLag − minLag) − 1 ms (Date.now() truncates) hold at most 50 starts.
 *   That is the brief's "1000 ms minus the largest lag" or stricter (minLag
 *   ≥ 0 on one host), and it holds even if the two clocks disagree by a
 *   constant.
 * - the work finished: every message was handled, and the group has nothing
 *   pending or leased at the end.
 *
 * Every child is SIGKILLed on the failure path too (children.ts).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { createStoreQueue } from '../../src/queue/engine.js';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { WorkerWatch } from '../helpers/children.js';
import { startWorker, type FlowWorker } from '../helpers/flow-workers.js';
import { installClaimLog, readClaimLog } from '../helpers/pg-claim-log.js';
import { busiestWindow } from '../helpers/windows.js';
import { waitFor } from '../stores/helpers.js';
import { POSTGRES_SKIP, POSTGRES_URL, dropSchema, testSchema } from '../stores/postgres-env.js';

const TOTAL = 500;
const LIMIT = { max: 50, intervalMs: 1000 };
const LEASE_MS = 30_000;

describe('rate limit across processes', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('rate');
  after(() => dropSchema(schema));

  it(`3 processes with rateLimit ${JSON.stringify(LIMIT)}: every 1-second window of claims holds at most 50, and of handler starts allowing for their lag; all ${TOTAL} handled`, { timeout: 600_000 }, async () => {
    const store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 2 });
    const q = createStoreQueue(store, { onError: () => undefined });
    const workers: FlowWorker[] = [];
    try {
      await store.ensureGroup('jobs', 'workers', 'latest');
      await installClaimLog(schema, LEASE_MS);
      for (let i = 0; i < TOTAL; i += 100) {
        await q.publish(...Array.from({ length: 100 }, (_, j) => ({ topic: 'jobs', payload: new TextEncoder().encode(`m${i + j}`) })));
      }
      const watch = new WorkerWatch();
      const opts = { rateLimit: LIMIT, concurrency: 8, pollIntervalMs: 50, leaseDurationMs: LEASE_MS };
      workers.push(...(await Promise.all(['w0', 'w1', 'w2'].map((name) => startWorker(POSTGRES_URL, schema, name, opts, 5, watch)))));
      const handled = () => new Set(workers.flatMap((w) => w.starts.map((s) => s.id))).size;
      await waitFor(() => (watch.check(), handled() === TOTAL), 300_000, `all ${TOTAL} handled`);
      await waitFor(async () => {
        const st = await store.stats('jobs', 'workers');
        return st.pending === 0 && st.leased === 0;
      }, 120_000, 'the last acks');
      for (const w of workers) await w.stop();

      const claims = await readClaimLog(schema);
      assert.ok(claims.length >= TOTAL, `${claims.length} claims logged`);
      const busiestClaims = busiestWindow(claims.map((c) => c.atUs), LIMIT.intervalMs * 1000);
      assert.ok(busiestClaims <= LIMIT.max, `${busiestClaims} claims in one ${LIMIT.intervalMs} ms window`);

      const claimedAt = new Map(claims.map((c) => [`${c.deliveryId} ${c.attempt}`, c.atUs / 1000]));
      const starts = workers.flatMap((w) => w.starts);
      const lags = starts.map((s) => {
        const c = claimedAt.get(`${s.id} ${s.attempt}`);
        assert.ok(c !== undefined, `the start of ${s.id} attempt ${s.attempt} has a logged claim`);
        return s.at - c;
      });
      const spread = Math.max(...lags) - Math.min(...lags);
      const width = LIMIT.intervalMs - spread - 1;
      const busiestStarts = width > 0 ? busiestWindow(starts.map((s) => s.at).sort((a, b) => a - b), width) : 0;
      process.stdout.write(
        `claims: ${claims.length}, busiest ${LIMIT.intervalMs} ms: ${busiestClaims}; claim-to-start lag ${Math.min(...lags).toFixed(1)}..${Math.max(...lags).toFixed(1)} ms; busiest ${width.toFixed(1)} ms of starts: ${busiestStarts}\n`,
      );
      assert.ok(busiestStarts <= LIMIT.max, `${busiestStarts} handler starts within ${width.toFixed(1)} ms`);
    } finally {
      for (const w of workers) w.child.kill('SIGKILL');
      await q.close({ timeoutMs: 100 });
      await store.close();
    }
  });
});
