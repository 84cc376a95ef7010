/**
 * graphile-worker 0.17 as a job queue, with the settings of its performance
 * page: a local queue (`localQueue.size: 500`) so one query locks a batch for
 * the pool, and batched completion (`completeJobBatchDelay: 0`,
 * `failJobBatchDelay: 0`). The per-key mode puts each key in a named queue
 * (`queueName`), which runs a queue's jobs one at a time. 0.18 needs Node 22.
 */
import { Logger, makeWorkerUtils, run } from 'graphile-worker';
import type { Runner, WorkerUtils } from 'graphile-worker';
import pg from 'pg';
import { BODY_TEXT, PG_URL } from './common.js';
import type { JobMessage } from './common.js';
import type { ConsumeSpec, JobInstance, JobSystem } from './job-system.js';

const TASK = 'bench';
const FILL_CHUNK = 50_000;
const silent = new Logger(() => () => {});

interface Payload {
  s: number;
  k?: string;
  q?: number;
  b: string;
}

function instance(utils: WorkerUtils, schema: string): JobInstance {
  return {
    async publish(msgs: JobMessage[]) {
      await utils.addJobs(
        msgs.map((m) => ({ identifier: TASK, payload: { s: m.sent, k: m.key, q: m.seq, b: BODY_TEXT } satisfies Payload, queueName: m.key, maxAttempts: 3 })),
      );
    },
    async fill(n) {
      // add_jobs, graphile-worker's own bulk insert, fed from generate_series.
      const admin = new pg.Pool({ connectionString: PG_URL, max: 1 });
      try {
        for (let done = 0; done < n; done += FILL_CHUNK) {
          await admin.query(
            `SELECT "${schema}".add_jobs(ARRAY(
               SELECT json_populate_record(NULL::"${schema}".job_spec,
                 json_build_object('identifier', $1::text, 'payload', json_build_object('s', 0, 'b', $2::text), 'max_attempts', 3))
               FROM generate_series(1, $3::int)))`,
            [TASK, BODY_TEXT, Math.min(FILL_CHUNK, n - done)],
          );
        }
      } finally {
        await admin.end();
      }
    },
    async consume(spec: ConsumeSpec) {
      const runner: Runner = await run({
        connectionString: PG_URL,
        schema,
        concurrency: spec.concurrency,
        maxPoolSize: spec.concurrency + 1,
        noHandleSignals: true,
        pollInterval: 500,
        logger: silent,
        taskList: {
          [TASK]: async (payload) => {
            const p = payload as Payload;
            await spec.handler({ sent: p.s, key: p.k, seq: p.q });
          },
        },
        preset: { worker: { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
      });
      return { close: async () => runner.stop() };
    },
    close: async () => {
      await utils.release();
    },
  };
}

export const graphileWorker: JobSystem = {
  name: 'graphile-worker',
  packages: ['graphile-worker'],
  settings: [
    { setting: '`concurrency`', value: '16', default: '1' },
    { setting: '`maxPoolSize`', value: '17', default: '10' },
    { setting: '`localQueue.size`', value: '500', default: '-1 (off)' },
    { setting: '`completeJobBatchDelay` / `failJobBatchDelay`', value: '0 / 0 ms', default: '-1 / -1 (off)' },
    { setting: '`pollInterval`', value: '500 ms', default: '2000 ms' },
    { setting: '`maxAttempts`', value: '3', default: '25' },
    { setting: 'retry delay', value: 'exp(min(attempts, 10)) s: 2.7 s after the first failure (not configurable)', default: 'same' },
    { setting: 'per-key workload', value: 'one named queue (`queueName`) per key', default: 'no queue' },
    { setting: 'publish', value: '`addJobs(100 specs)` per batch', default: '' },
  ],
  differs: ['no fencing'],
  keyOrder: 'order breaks on a retry',
  caveats: 'no fencing: completion deletes the job by ID without checking which worker holds it; named queues run one job at a time but a failed job does not hold its queue: later jobs of the key run before its retry (no per-key order under failure)',
  keyed: true,
  async create(schema) {
    const utils = await makeWorkerUtils({ connectionString: PG_URL, schema, logger: silent });
    await utils.migrate();
    return instance(utils, schema);
  },
  async connect(schema) {
    return instance(await makeWorkerUtils({ connectionString: PG_URL, schema, logger: silent }), schema);
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
