/**
 * pg-boss 12 as a job queue. Consumers fetch in batches (`batchSize`), as
 * pg-boss's docs recommend for throughput, with `localConcurrency` workers
 * each running its batch's jobs one after another, so 16 handlers run at
 * once; `burstWhenBatchFull` makes a worker fetch again at once after a full
 * batch, and LISTEN/NOTIFY wakes idle workers. The per-key mode uses the
 * `key_strict_fifo` queue policy with the key as `singletonKey`.
 *
 * pg-boss 12 declares Node >= 22.12 in its engines; it runs on Node 20 for
 * everything used here.
 */
import { PgBoss } from 'pg-boss';
import type { Job, JobResult } from 'pg-boss';
import pg from 'pg';
import { BODY_TEXT, PG_URL } from './common.js';
import type { JobMessage } from './common.js';
import type { JobInstance, JobSystem } from './job-system.js';

const QUEUE = 'bench';
const FILL_CHUNK = 5000;

interface Data {
  s: number;
  k?: string;
  q?: number;
  b: string;
}

async function start(schema: string): Promise<PgBoss> {
  const boss = new PgBoss({ connectionString: PG_URL, schema, max: 10, useListenNotify: true, supervise: false, schedule: false });
  boss.on('error', () => {});
  await boss.start();
  return boss;
}

function instance(boss: PgBoss): JobInstance {
  return {
    async publish(msgs: JobMessage[]) {
      await boss.insert(
        QUEUE,
        msgs.map((m) => ({ data: { s: m.sent, k: m.key, q: m.seq, b: BODY_TEXT } satisfies Data, singletonKey: m.key })),
      );
    },
    async fill(n) {
      const jobs = Array.from({ length: FILL_CHUNK }, () => ({ data: { s: 0, b: BODY_TEXT } satisfies Data }));
      const chunks: Promise<unknown>[] = [];
      for (let done = 0; done < n; done += FILL_CHUNK) {
        chunks.push(boss.insert(QUEUE, jobs.slice(0, Math.min(FILL_CHUNK, n - done))));
        if (chunks.length >= 4) await chunks.shift();
      }
      await Promise.all(chunks);
    },
    async consume(spec) {
      const batchSize = 16;
      const localConcurrency = Math.max(1, Math.round(spec.concurrency));
      const id = await boss.work<Data>(
        QUEUE,
        { batchSize, localConcurrency, pollingIntervalSeconds: 0.5, notifyPollingIntervalSeconds: 0.5, burstWhenBatchFull: true, perJobResults: true },
        async (jobs: Job<Data>[]) => {
          const results: JobResult[] = [];
          for (const j of jobs) {
            try {
              await spec.handler({ sent: j.data.s, key: j.data.k, seq: j.data.q });
              results.push({ id: j.id, status: 'completed' });
            } catch (err) {
              results.push({ id: j.id, status: 'failed', output: { message: String(err) } });
            }
          }
          return results;
        },
      );
      return { close: () => boss.offWork(QUEUE, { id }) };
    },
    close: () => boss.stop({ graceful: true, timeout: 5000 }),
  };
}

export const pgBoss: JobSystem = {
  name: 'pg-boss',
  packages: ['pg-boss'],
  settings: [
    { setting: 'work `batchSize` (jobs per fetch)', value: '16', default: '1' },
    { setting: 'work `localConcurrency` (workers; each runs its batch in order)', value: '16', default: '1' },
    { setting: 'work `burstWhenBatchFull`', value: 'true', default: 'false' },
    { setting: 'work `pollingIntervalSeconds` / `notifyPollingIntervalSeconds`', value: '0.5 / 0.5 (the minimum)', default: '2 / 30' },
    { setting: 'work `perJobResults` (a failed job fails alone, not its batch)', value: 'true', default: 'false' },
    { setting: '`useListenNotify` + queue `notify`', value: 'true', default: 'false' },
    { setting: 'queue `retryLimit` / `retryDelay`', value: '2 / 1 s', default: '2 / 0 s' },
    { setting: 'queue `policy`', value: '`standard`; per-key workload: `key_strict_fifo`', default: '`standard`' },
    { setting: 'pool `max`', value: '10', default: '10' },
    { setting: '`supervise`, `schedule` (maintenance, cron)', value: 'false', default: 'true' },
    { setting: 'publish', value: '`insert(name, 100 jobs)` per batch', default: '' },
  ],
  differs: [],
  keyOrder: 'order only across `insert` calls',
  caveats: 'per-key order only between `insert` calls: the jobs of one call share `created_on` and run in the order of their random UUIDs',
  keyed: true,
  async create(schema, keyed) {
    const boss = await start(schema);
    await boss.createQueue(QUEUE, { policy: keyed ? 'key_strict_fifo' : 'standard', notify: true, retryLimit: 2, retryDelay: 1 });
    return instance(boss);
  },
  async connect(schema) {
    return instance(await start(schema));
  },
  async drop(schema) {
    const admin = new pg.Pool({ connectionString: PG_URL, max: 1 });
    try {
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    } finally {
      await admin.end();
    }
  },
};
