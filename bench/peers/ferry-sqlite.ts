/**
 * ferry's `sqlite` store: `createQueue({ type: 'sqlite' })` (synchronous
 * FULL, the default) and, for the comparison at plainjob's default
 * durability, the same store opened with `synchronous: 'normal'`.
 */
import { join } from 'node:path';
import { createQueue, createStoreQueue, SqliteStore } from '../../src/queue/index.js';
import type { Queue } from '../../src/queue/index.js';
import { BODY_BYTES } from './common.js';
import { betterSqliteVersion } from './embedded-system.js';
import type { EmbeddedInstance, EmbeddedSystem } from './embedded-system.js';

const TOPIC = 'bench';
const GROUP = 'workers';

function instance(q: Queue): EmbeddedInstance {
  const msg = { topic: TOPIC, payload: BODY_BYTES };
  return {
    async publishOne() {
      await q.publish(msg);
    },
    async publishBatch(n) {
      await q.publish(...Array.from({ length: n }, () => msg));
    },
    async drain(total) {
      let handled = 0;
      let done!: () => void;
      const finished = new Promise<void>((r) => (done = r));
      const start = performance.now();
      const sub = await q.subscribe(TOPIC, GROUP, async () => {
        if (++handled === total) done();
      }, { concurrency: 16 });
      await finished;
      const ms = performance.now() - start;
      await sub.close();
      return (total * 1000) / ms;
    },
    close: () => q.close(),
  };
}

async function prepared(q: Queue): Promise<EmbeddedInstance> {
  // Registers the group before anything is published.
  const sub = await q.subscribe(TOPIC, GROUP, async () => {}, { startFrom: 'earliest' });
  await sub.close();
  return instance(q);
}

const common = {
  packages: ['better-sqlite3'],
  caveats: '',
  differs: [] as string[],
  sqlite: betterSqliteVersion,
  concurrentPublish: true,
};

export const ferrySqlite: EmbeddedSystem = {
  ...common,
  name: 'ferry sqlite',
  settings: [
    { setting: '`synchronous`', value: 'FULL', default: 'FULL' },
    { setting: 'journal', value: 'WAL', default: 'WAL' },
    { setting: 'subscribe `concurrency`', value: '16', default: '4' },
  ],
  async open(dir) {
    const q = await createQueue({ enabled: true, type: 'sqlite', config: { path: join(dir, 'queue.db') } }, { onError: () => {} });
    return prepared(q!);
  },
};

export const ferrySqliteNormal: EmbeddedSystem = {
  ...common,
  name: 'ferry sqlite NORMAL',
  differs: ['no fsync per commit (NORMAL)'],
  caveats: 'synchronous NORMAL: a power cut may lose the last commits',
  settings: [
    { setting: '`synchronous`', value: 'NORMAL (`SqliteStore.open({ synchronous: "normal" })`)', default: 'FULL' },
    { setting: 'subscribe `concurrency`', value: '16', default: '4' },
  ],
  async open(dir) {
    const store = await SqliteStore.open({ path: join(dir, 'queue.db'), synchronous: 'normal' });
    return prepared(createStoreQueue(store, { onError: () => {} }));
  },
};
