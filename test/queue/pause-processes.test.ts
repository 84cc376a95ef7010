/**
 * Pause and resume across processes: workers A and B consume one group on
 * one Postgres schema; A pauses the group, later resumes it. B polls hourly,
 * so everything B does after its first claim comes from its own claims
 * running on (a full claim is followed by the next) or from a wake-up heard
 * through the database.
 *
 * Checked from what was recorded (handler starts logged by the workers, each
 * claim's instant logged by a trigger, test/helpers/pg-claim-log.ts):
 * - after A's pauseGroup resolved, each worker starts only deliveries of at
 *   most one claim: the one it had in flight as the pause committed; then
 *   nothing, while work waits (stats: paused, pending);
 * - after A's resumeGroup resolved, B starts deliveries again: woken by A's
 *   NOTIFY, since its poll would not come for an hour.
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
import { HOUR_POLL, sleep } from '../stores/helpers.js';
import { POSTGRES_SKIP, POSTGRES_URL, dropSchema, testSchema } from '../stores/postgres-env.js';

const TOTAL = 3000;
const LEASE_MS = 30_000;
/** How long the test watches the paused group for a start that should not come. Not a speed check: nothing may start however long it is. */
const QUIET_MS = 1500;

describe('pause across processes', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('pause');
  after(() => dropSchema(schema));

  it('B stops claiming once A\'s pauseGroup resolved (but for the claim it had in flight) and claims again once A\'s resumeGroup resolved', { timeout: 600_000 }, async () => {
    const store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 2 });
    const q = createStoreQueue(store, { onError: () => undefined });
    const workers: FlowWorker[] = [];
    try {
      await store.ensureGroup('jobs', 'workers', 'latest');
      await installClaimLog(schema, LEASE_MS);
      for (let i = 0; i < TOTAL; i += 500) {
        await q.publish(...Array.from({ length: 500 }, (_, j) => ({ topic: 'jobs', payload: new TextEncoder().encode(`m${i + j}`) })));
      }
      const watch = new WorkerWatch();
      const common = { concurrency: 4, batchSize: 4, leaseDurationMs: LEASE_MS };
      const a = await startWorker(POSTGRES_URL, schema, 'A', { ...common, pollIntervalMs: 200 }, 10, watch);
      const b = await startWorker(POSTGRES_URL, schema, 'B', { ...common, pollIntervalMs: HOUR_POLL }, 10, watch);
      workers.push(a, b);
      await b.until(() => b.starts.length >= 20, 'B under way', watch);

      const pausedAt = await a.command('pause', watch);
      await sleep(QUIET_MS);
      watch.check();
      const claims = await readClaimLog(schema);
      const claimOf = new Map(claims.map((c) => [`${c.deliveryId} ${c.attempt}`, c.atUs]));
      for (const w of workers) {
        const late = w.starts.filter((s) => s.at > pausedAt);
        const lateClaims = new Set(late.map((s) => claimOf.get(`${s.id} ${s.attempt}`)));
        assert.ok(lateClaims.size <= 1, `${w.name} started ${late.length} deliveries of ${lateClaims.size} claims after the pause resolved`);
      }
      const st = await store.stats('jobs', 'workers');
      assert.equal(st.paused, true);
      assert.ok(st.pending > 0, 'work waits');
      const startedWhilePaused = b.starts.length;

      const resumedAt = await a.command('resume', watch);
      await b.until(() => b.starts.some((s) => s.at > resumedAt), 'B to start a delivery after the resume', watch);
      assert.ok(b.starts.length > startedWhilePaused);
      assert.equal((await store.stats('jobs', 'workers')).paused, false);
      process.stdout.write(`B: ${startedWhilePaused} starts before the resume, ${b.starts.length - startedWhilePaused} after; A: ${a.starts.length}\n`);
      for (const w of workers) await w.stop();
    } finally {
      for (const w of workers) w.child.kill('SIGKILL');
      await q.close({ timeoutMs: 100 });
      await store.close();
    }
  });
});
