/**
 * ferry's DiskQueue with its default sync policy, per operation: every add
 * resolves after its fdatasync, which concurrent adds share (group commit).
 *
 * `embedded.consume` is what the row says for every system: consumption with
 * concurrency 16, here 16 readers of the queue each looping `reserve` +
 * `ack` (at-least-once, as ferry sqlite's subscriber). The DiskQueue's other
 * consuming paths get rows of their own, each on a fresh directory holding
 * the same backlog:
 *
 * - `consume.reserve_batch`: 16 readers, `reserveBatch(100)` + `ackBatch`;
 * - `consume.take_batch`: 16 readers, `takeBatch(100)` (at most once per batch);
 * - `consume.serial_drain`: one `reader().drain()` loop, the serial
 *   at-most-once path, one commit (and under this policy one fdatasync) per record.
 */
import { DiskQueue } from '../../src/diskqueue/index.js';
import type { Reader } from '../../src/diskqueue/index.js';
import { BODY_BYTES } from './common.js';
import type { EmbeddedSystem } from './embedded-system.js';

const READERS = 16;
const BATCH = 100;

/** Runs `each` on 16 readers at once until `total` records were consumed; resolves with records/s. */
async function concurrently(q: DiskQueue, total: number, each: (r: Reader<Uint8Array>) => Promise<number>): Promise<number> {
  let got = 0;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: READERS }, async () => {
      const r = q.reader();
      while (got < total) {
        const n = await each(r);
        if (n === 0) break;
        got += n;
      }
    }),
  );
  if (got < total) throw new Error(`consumed ${got} of ${total}`);
  return (got * 1000) / (performance.now() - start);
}

export const ferryDiskQueue: EmbeddedSystem = {
  name: 'ferry DiskQueue',
  packages: [],
  settings: [
    { setting: 'sync policy', value: 'per operation (`syncEvery` 0, `noSync` false)', default: 'per operation' },
    { setting: 'consume', value: `${READERS} readers, each \`reserve()\` + \`ack(offset)\` per record`, default: '' },
    { setting: 'consume.reserve_batch', value: `${READERS} readers, \`reserveBatch(${BATCH})\` + \`ackBatch\``, default: '' },
    { setting: 'consume.take_batch', value: `${READERS} readers, \`takeBatch(${BATCH})\` (at most once per batch)`, default: '' },
    { setting: 'consume.serial_drain', value: 'one `reader().drain()` loop: at most once, one commit per record, serial', default: '' },
  ],
  differs: ['no retries'],
  rowDiffers: {
    'embedded.consume.take_batch': 'at most once (a crash loses the batch taken)',
    'embedded.consume.serial_drain': 'at most once; serial, one fdatasync per record',
  },
  caveats: 'a log, not a job queue: its readers share one cursor (no consumer groups), and a reserved record not acknowledged comes back only on `rewind()` or reopen (no leases, no retries)',
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
      drain: (total) =>
        concurrently(q, total, async (r) => {
          const got = await r.tryReserve();
          if (!got) return 0;
          await r.ack(got.offset);
          return 1;
        }),
      consumeModes: {
        reserve_batch: (total) =>
          concurrently(q, total, async (r) => {
            const got = await r.reserveBatch(BATCH);
            if (got.length > 0) await r.ackBatch(got.map((g) => g.offset));
            return got.length;
          }),
        take_batch: (total) => concurrently(q, total, async (r) => (await r.takeBatch(BATCH)).length),
        async serial_drain(total) {
          const r = q.reader();
          let got = 0;
          const start = performance.now();
          for await (const _ of r.drain()) if (++got === total) break;
          return (got * 1000) / (performance.now() - start);
        },
      },
      close: () => q.close(),
    };
  },
};
