/**
 * ferry's spool: a byte queue with one head, in the Go spool's format. Every
 * `append` resolves after its fdatasync, which concurrent appends share
 * (group commit); a batch of 100 is 100 `appendNoSync` and one `sync()`.
 *
 * The spool has one consumer by design (one head, consumed in order), so its
 * `embedded.consume` row is one consumer looping `popBatch(100)` +
 * `commitBatch`: the batch is its way past one record per commit, where the
 * other systems run 16 consumers. `consume.serial_pop` is the one-at-a-time
 * loop, `pop` + `commit` per record. The cursor is fdatasynced on every
 * commit (`commitSync`), so an acknowledgement survives a power cut as the
 * other systems' do; the spool's default writes it without the fdatasync.
 */
import { Spool, UNBOUNDED } from '../../src/spool/index.js';
import { BODY_BYTES } from './common.js';
import type { EmbeddedSystem } from './embedded-system.js';

const BATCH = 100;

/** Consumes `total` records with `step` (how many it consumed; 0 when empty); resolves with records/s. */
async function consume(total: number, step: () => Promise<number>): Promise<number> {
  let got = 0;
  const start = performance.now();
  while (got < total) {
    const n = await step();
    if (n === 0) break;
    got += n;
  }
  if (got < total) throw new Error(`consumed ${got} of ${total}`);
  return (got * 1000) / (performance.now() - start);
}

export const ferrySpool: EmbeddedSystem = {
  name: 'ferry spool',
  packages: [],
  settings: [
    { setting: 'publish', value: '`append` (fdatasync per call, shared by concurrent calls); batch: 100 × `appendNoSync` + `sync()`', default: '' },
    { setting: 'commitSync', value: 'true (the cursor fdatasynced on every commit)', default: 'false' },
    { setting: 'maxBytes', value: '`UNBOUNDED` (the run holds 72 MiB)', default: '64 MiB' },
    { setting: 'consume', value: `one consumer, \`popBatch(${BATCH})\` + \`commitBatch\``, default: '' },
    { setting: 'consume.serial_pop', value: 'one consumer, `pop` + `commit` per record', default: '' },
  ],
  differs: ['no retries', 'one consumer'],
  rowDiffers: {
    'embedded.consume.serial_pop': 'serial, one fdatasync per record',
  },
  caveats: 'a byte queue for store-and-forward, not a job queue: one head consumed in order by one consumer (no consumer groups, no leases, no retries); a record popped and not committed is popped again',
  concurrentPublish: true,
  async open(dir) {
    const s = await Spool.open(dir, { commitSync: true, maxBytes: UNBOUNDED });
    return {
      publishOne: () => s.append(BODY_BYTES),
      publishBatch: async (n) => {
        for (let i = 0; i < n; i++) await s.appendNoSync(BODY_BYTES);
        await s.sync();
      },
      drain: (total) =>
        consume(total, async () => {
          const got = await s.popBatch(BATCH);
          if (got.length > 0) await s.commitBatch(got);
          return got.length;
        }),
      consumeModes: {
        serial_pop: (total) =>
          consume(total, async () => {
            const got = await s.pop();
            if (!got) return 0;
            await got.commit();
            return 1;
          }),
      },
      close: () => s.close(),
    };
  },
};
