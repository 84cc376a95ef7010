/**
 * ferry's `postgres` store as a job queue, through the public API
 * (`createQueue({ type: 'postgres' })`). One topic, one consumer group; the
 * group is registered before anything is published, so every publish writes
 * its delivery rows. Consumers claim 128 at a time and hold up to 256 more
 * (`batchSize: 128, prefetch: 256`): settings of this benchmark, not ones
 * docs/QUEUE.md recommends (it gives only the defaults, 32 and 0). Larger
 * batches lift the consume rows and lower the live ones: with 500 and 1,000,
 * two passes ran p4.noop.consume 14% faster and every live row 5-18% slower.
 */
import pg from 'pg';
import { createQueue } from '../../src/queue/index.js';
import type { Queue } from '../../src/queue/index.js';
import { fillSchema } from '../postgres-fill.js';
import { BODY_BYTES, PG_URL } from './common.js';
import type { JobMessage } from './common.js';
import type { JobInstance, JobSystem } from './job-system.js';

const TOPIC = 'bench';
const GROUP = 'workers';
const SUBSCRIBE = { batchSize: 128, prefetch: 256, backoffBaseMs: 1000 };

async function open(schema: string): Promise<Queue> {
  const q = await createQueue({ enabled: true, type: 'postgres', config: { connectionString: PG_URL, schema } }, { onError: () => {} });
  return q!;
}

function instance(q: Queue, schema: string): JobInstance {
  return {
    async publish(msgs: JobMessage[]) {
      await q.publish(
        ...msgs.map((m) => ({
          topic: TOPIC,
          payload: BODY_BYTES,
          key: m.key,
          headers: (m.key === undefined ? { s: String(m.sent) } : { s: String(m.sent), q: String(m.seq) }) as Record<string, string>,
        })),
      );
    },
    async fill(n) {
      const admin = new pg.Pool({ connectionString: PG_URL, max: 1 });
      try {
        await fillSchema(admin, schema, TOPIC, GROUP, n, 0, 1024);
      } finally {
        await admin.end();
      }
    },
    async consume(spec) {
      const sub = await q.subscribe(
        TOPIC,
        GROUP,
        async (d) => {
          const h = d.headers ?? {};
          await spec.handler({ sent: Number(h.s ?? 0), key: d.key, seq: h.q === undefined ? undefined : Number(h.q) });
        },
        { ...SUBSCRIBE, concurrency: spec.concurrency, startFrom: 'earliest' },
      );
      return { close: () => sub.close({ timeoutMs: 5000 }) };
    },
    close: () => q.close({ timeoutMs: 5000 }),
  };
}

export const ferryPostgres: JobSystem = {
  name: 'ferry postgres',
  packages: [],
  settings: [
    { setting: 'subscribe `concurrency`', value: '16', default: '4' },
    { setting: 'subscribe `batchSize`', value: '128', default: '32' },
    { setting: 'subscribe `prefetch`', value: '256', default: '0' },
    { setting: 'subscribe `backoffBaseMs` (first retry delay)', value: '1000', default: '1000' },
    { setting: 'store pool size', value: '10', default: '10' },
    { setting: 'publish', value: 'one `publish(...100 messages)` call per batch: one statement (the first publish to a topic: a transaction of four)', default: '' },
  ],
  differs: [],
  keyOrder: '',
  caveats: '',
  keyed: true,
  async create(schema) {
    const q = await open(schema);
    // Registers the group (nothing is published yet), so publishes write its deliveries.
    const sub = await q.subscribe(TOPIC, GROUP, async () => {}, { startFrom: 'earliest' });
    await sub.close();
    return instance(q, schema);
  },
  async connect(schema) {
    return instance(await open(schema), schema);
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
