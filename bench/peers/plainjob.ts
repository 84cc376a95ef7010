/**
 * plainjob 0.0.14 on better-sqlite3: at its default (it sets WAL and
 * `synchronous = NORMAL` itself) and at `synchronous = FULL`, set on the
 * same connection after `defineQueue`. Its API is synchronous, so concurrent
 * publishers would only run one after another: there is no 64-publisher row.
 * Consumption runs 16 workers (`defineWorker`), each taking one job at a time.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { better, defineQueue, defineWorker } from 'plainjob';
import { BODY_TEXT } from './common.js';
import { betterSqliteVersion } from './embedded-system.js';
import type { EmbeddedInstance, EmbeddedSystem } from './embedded-system.js';

const TYPE = 'bench';
const silent = { error() {}, warn() {}, info() {}, debug() {} };

async function open(dir: string, full: boolean): Promise<EmbeddedInstance> {
  const db = new Database(join(dir, 'plainjob.db'));
  const queue = defineQueue({ connection: better(db), logger: silent, maintenanceInterval: 3_600_000 });
  if (full) db.pragma('synchronous = FULL');
  return {
    publishOne() {
      queue.add(TYPE, BODY_TEXT);
    },
    publishBatch(n) {
      queue.addMany(TYPE, Array.from({ length: n }, () => BODY_TEXT));
    },
    async drain(total) {
      let handled = 0;
      let done!: () => void;
      const finished = new Promise<void>((r) => (done = r));
      const workers = Array.from({ length: 16 }, () =>
        defineWorker(TYPE, async () => {
          if (++handled === total) done();
        }, { queue, logger: silent, pollIntervall: 10 }),
      );
      const start = performance.now();
      const running = workers.map((w) => w.start());
      await finished;
      const ms = performance.now() - start;
      await Promise.all(workers.map((w) => w.stop()));
      await Promise.all(running);
      return (total * 1000) / ms;
    },
    close() {
      queue.close();
      db.close();
    },
  };
}

const common = {
  packages: ['plainjob', 'better-sqlite3'],
  sqlite: betterSqliteVersion,
  concurrentPublish: false,
};

export const plainjobFull: EmbeddedSystem = {
  ...common,
  name: 'plainjob FULL',
  differs: ['no fencing'],
  caveats: 'no fencing: a job is marked done by ID alone',
  settings: [
    { setting: '`synchronous`', value: 'FULL (set after `defineQueue`)', default: 'NORMAL (plainjob sets it)' },
    { setting: 'workers', value: '16 × `defineWorker`, `pollIntervall` 10 ms', default: '1 worker, 1000 ms' },
  ],
  open: (dir) => open(dir, true),
};

export const plainjobNormal: EmbeddedSystem = {
  ...common,
  name: 'plainjob NORMAL',
  differs: ['no fencing', 'no fsync per commit (NORMAL)'],
  caveats: 'no fencing; synchronous NORMAL: a power cut may lose the last commits',
  settings: [
    { setting: '`synchronous`', value: 'NORMAL', default: 'NORMAL (plainjob sets it)' },
    { setting: 'workers', value: '16 × `defineWorker`, `pollIntervall` 10 ms', default: '1 worker, 1000 ms' },
  ],
  open: (dir) => open(dir, false),
};
