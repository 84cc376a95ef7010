/**
 * DiskQueue figures, each beside a raw twin of the same record size measured
 * in the same run on the same disk:
 *
 * - add.nosync / add.batch100.nosync: 256 B records vs a raw loop doing the
 *   same two writes per add (the record at the tail, the header at offset 0).
 * - add.durable.p1 / .p64: per-op policy, 1 and 64 concurrent producers vs a
 *   pwrite + fdatasync loop (one fsync per record; the queue pays two).
 * - take / take.64k: draining a 1 GiB backlog of 4 KiB / 64 KiB records vs
 *   sequential pread of the same bytes in record-sized reads. Each take
 *   commits, and a commit writes the segment header before it resolves.
 *
 * Timers stop before close, so the final flush is not counted.
 */
import * as fs from 'node:fs';
import { join } from 'node:path';
import { DiskQueue } from '../src/diskqueue/index.js';
import { withBaseline, type BenchContext, type BenchSuite } from './harness.js';
import { payload, rawAddRate, rawDurableRate } from './raw.js';

const SMALL = 256;

async function addRate(dir: string, opts: { noSync?: boolean; producers: number; batch?: number; ms: number }): Promise<number> {
  const q = await DiskQueue.open(dir, { noSync: opts.noSync, maxSegments: 0 });
  const rec = payload(SMALL);
  const batch = opts.batch ? Array.from({ length: opts.batch }, () => rec) : undefined;
  let n = 0;
  let stop = false;
  const start = performance.now();
  const producer = async () => {
    while (!stop) {
      if (batch) {
        n += await q.addBatch(batch);
      } else {
        await q.add(rec);
        n++;
      }
      if ((n & 63) === 0 && performance.now() - start >= opts.ms) stop = true;
    }
  };
  const timer = setTimeout(() => (stop = true), opts.ms);
  await Promise.all(Array.from({ length: opts.producers }, producer));
  clearTimeout(timer);
  const rate = (n * 1000) / (performance.now() - start);
  await q.close();
  fs.rmSync(dir, { recursive: true, force: true });
  return rate;
}

async function takeBench(ctx: BenchContext, size: number, name: string): Promise<void> {
  const total = Math.max(16 << 20, Math.round((1 << 30) * ctx.scale));
  const count = Math.floor(total / size);
  const dir = join(ctx.tmpDir, 'take');
  const q = await DiskQueue.open(dir, { noSync: true, maxSegments: 0 });
  const rec = payload(size);
  const batch = Array.from({ length: Math.max(1, (1 << 20) / size) }, () => rec);
  for (let placed = 0; placed < count; placed += batch.length) await q.addBatch(batch);
  await q.sync();

  // Raw twin: sequential pread of the same segment files in record-sized reads.
  const files = fs.readdirSync(dir).filter((f) => f.startsWith('data.')).sort();
  const buf = new Uint8Array(size);
  let rawBytes = 0;
  const rawStart = performance.now();
  for (const f of files) {
    const fd = fs.openSync(join(dir, f), 'r');
    for (let pos = 0; ; pos += size) {
      const n = fs.readSync(fd, buf, 0, size, pos);
      rawBytes += n;
      if (n < size) break;
    }
    fs.closeSync(fd);
  }
  const rawMs = performance.now() - rawStart;

  const r = q.reader();
  let got = 0;
  const start = performance.now();
  for await (const v of r.drain()) got += v.length;
  const ms = performance.now() - start;
  await q.close();
  const mib = (b: number, t: number) => b / (1 << 20) / (t / 1000);
  ctx.report(withBaseline(name, 'MiB/s', mib(got, ms), mib(rawBytes, rawMs), { records: count, recordBytes: size }));
  fs.rmSync(dir, { recursive: true, force: true });
}

export const suite: BenchSuite = {
  name: 'diskqueue',
  async run(ctx) {
    const ms = Math.max(500, 3000 * ctx.scale);
    const tmp = (name: string) => join(ctx.tmpDir, name);

    const rawWrite = rawAddRate(tmp('raw-write'), SMALL, ms);
    const nosync = await addRate(tmp('nosync'), { noSync: true, producers: 1, ms });
    ctx.report(withBaseline('diskqueue.add.nosync', 'ops/s', nosync, rawWrite, { recordBytes: SMALL }));
    const batch = await addRate(tmp('batch'), { noSync: true, producers: 1, batch: 100, ms });
    ctx.report(withBaseline('diskqueue.add.batch100.nosync', 'ops/s', batch, rawWrite, { recordBytes: SMALL }));

    const rawDurable = await rawDurableRate(tmp('raw-durable'), SMALL, ms);
    const p1 = await addRate(tmp('p1'), { producers: 1, ms });
    ctx.report(withBaseline('diskqueue.add.durable.p1', 'ops/s', p1, rawDurable, { recordBytes: SMALL }));
    const p64 = await addRate(tmp('p64'), { producers: 64, ms });
    ctx.report(withBaseline('diskqueue.add.durable.p64', 'ops/s', p64, rawDurable, { recordBytes: SMALL, vsP1: p64 / p1 }));

    await takeBench(ctx, 4096, 'diskqueue.take');
    await takeBench(ctx, 65536, 'diskqueue.take.64k');
  },
};
