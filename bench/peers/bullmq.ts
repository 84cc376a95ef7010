/**
 * BullMQ 6 on the local Redis, the non-Postgres reference. Each round uses a
 * key prefix of its own, removed afterwards with SCAN + UNLINK (never a
 * flush: other programs share this Redis). The Redis here keeps nothing on
 * disk (`--save "" --appendonly no`), so an acknowledged job survives neither
 * a Redis restart nor a power cut.
 */
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { BODY_TEXT, REDIS_URL } from './common.js';
import type { JobMessage } from './common.js';
import type { ConsumeSpec, JobInstance, JobSystem } from './job-system.js';

const NAME = 'bench';
const FILL_CHUNK = 1000;

interface Data {
  s: number;
  b: string;
}

const connection = () => new Redis(REDIS_URL, { maxRetriesPerRequest: null });

function instance(prefix: string): JobInstance {
  const conn = connection();
  const queue = new Queue<Data>(NAME, { connection: conn, prefix });
  const opts = { removeOnComplete: true, removeOnFail: true, attempts: 3 };
  return {
    async publish(msgs: JobMessage[]) {
      await queue.addBulk(msgs.map((m) => ({ name: NAME, data: { s: m.sent, b: BODY_TEXT }, opts })));
    },
    async fill(n) {
      const batch = Array.from({ length: FILL_CHUNK }, () => ({ name: NAME, data: { s: 0, b: BODY_TEXT }, opts }));
      const inFlight: Promise<unknown>[] = [];
      for (let done = 0; done < n; done += FILL_CHUNK) {
        inFlight.push(queue.addBulk(batch.slice(0, Math.min(FILL_CHUNK, n - done))));
        if (inFlight.length >= 8) await inFlight.shift();
      }
      await Promise.all(inFlight);
    },
    async consume(spec: ConsumeSpec) {
      const worker = new Worker<Data>(NAME, async (job) => spec.handler({ sent: job.data.s }), {
        connection: connection(),
        prefix,
        concurrency: spec.concurrency,
        removeOnComplete: { count: 0 },
        removeOnFail: { count: 0 },
      });
      worker.on('error', () => {});
      await worker.waitUntilReady();
      return { close: () => worker.close() };
    },
    async close() {
      await queue.close();
      conn.disconnect();
    },
  };
}

export const bullmq: JobSystem = {
  name: 'BullMQ',
  packages: ['bullmq', 'ioredis'],
  settings: [
    { setting: 'Worker `concurrency`', value: '16', default: '1' },
    { setting: 'job `removeOnComplete` / `removeOnFail`', value: 'true / true', default: 'false / false (kept)' },
    { setting: 'job `attempts`', value: '3', default: '1' },
    { setting: 'Redis persistence (machine setting)', value: 'none (`--save "" --appendonly no`)', default: 'RDB snapshots' },
    { setting: 'publish', value: '`addBulk(100 jobs)` per batch', default: '' },
  ],
  differs: ['no fsync'],
  keyOrder: '',
  caveats: 'no fsync (this Redis keeps nothing on disk); per-key order needs BullMQ Pro groups, so no per-key row',
  keyed: false,
  async create(prefix) {
    return instance(prefix);
  },
  async connect(prefix) {
    return instance(prefix);
  },
  async drop(prefix) {
    const r = connection();
    try {
      let cursor = '0';
      do {
        const [next, keys] = await r.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 10_000);
        cursor = next;
        if (keys.length) await r.unlink(...keys);
      } while (cursor !== '0');
    } finally {
      r.disconnect();
    }
  },
};
