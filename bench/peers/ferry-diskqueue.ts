/**
 * ferry's DiskQueue with its default sync policy, per operation: every add
 * resolves after its fdatasync, which concurrent adds share (group commit).
 * Consumption is `reader().drain()`, committing each record as it is taken.
 */
import { DiskQueue } from '../../src/diskqueue/index.js';
import { BODY_BYTES } from './common.js';
import type { EmbeddedSystem } from './embedded-system.js';

export const ferryDiskQueue: EmbeddedSystem = {
  name: 'ferry DiskQueue',
  packages: [],
  settings: [
    { setting: 'sync policy', value: 'per operation (`syncEvery` 0, `noSync` false)', default: 'per operation' },
    { setting: 'consume', value: '`reader().drain()`, one record per commit', default: '' },
  ],
  differs: ['one consumer, no retries'],
  caveats: 'a single-consumer log: no consumer groups, leases or retries',
  concurrentPublish: true,
  async open(dir) {
    const q = await DiskQueue.open(dir, { maxSegments: 0 });
    return {
      publishOne: async () => {
        await q.add(BODY_BYTES);
      },
      publishBatch: async (n) => {
        await q.addBatch(Array.from({ length: n }, () => BODY_BYTES));
      },
      async drain(total) {
        const r = q.reader();
        let got = 0;
        const start = performance.now();
        for await (const _ of r.drain()) if (++got === total) break;
        return (got * 1000) / (performance.now() - start);
      },
      close: () => q.close(),
    };
  },
};
