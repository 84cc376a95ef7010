/**
 * DiskQueue figures, each beside a raw twin of the same record size measured
 * in the same run on the same disk:
 *
 * - add.nosync / add.batch100.nosync: 256 B records vs a plain pwrite loop.
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

const SMALL = 256;

export function payload(size: number): Uint8Array {
  const b = new Uint8Array(size);
  for (let i = 0; i < size; i++) b[i] = (i * 31) & 0xff;
  return b;
}

/** Raw twin: sequential pwrite of `size`-byte records into a preallocated file. */
export function rawWriteRate(path: string, size: number, ms: number): number {
  const fd = fs.openSync(path, 'w+');
  const buf = payload(size);
  const fileSize = 64 << 20;
  fs.ftruncateSync(fd, fileSize);
  let pos = 0;
  let n = 0;
  const start = performance.now();
  let now = start;
  while (now - start < ms) {
    for (let i = 0; i < 256; i++) {
      fs.writeSync(fd, buf, 0, size, pos);
      pos += size;
      if (pos + size > fileSize) pos = 0;
    }
    n += 256;
    now = performance.now();
  }
  fs.closeSync(fd);
  fs.rmSync(path);
  return (n * 1000) / (now - start);
}

/** Raw twin: pwrite then fdatasync (on the thread pool) per record. */
export async function rawDurableRate(path: string, size: number, ms: number): Promise<number> {
  const fd = fs.openSync(path, 'w+');
  const buf = payload(size);
  fs.writeSync(fd, new Uint8Array(16 << 20), 0, 16 << 20, 0);
  fs.fdatasyncSync(fd);
  const sync = () => new Promise<void>((res, rej) => fs.fdatasync(fd, (e) => (e ? rej(e) : res())));
  let pos = 0;
  let n = 0;
  const start = performance.now();
  while (performance.now() - start < ms) {
    fs.writeSync(fd, buf, 0, size, pos);
    pos = (pos + size) % (16 << 20);
    await sync();
    n++;
  }
  const rate = (n * 1000) / (performance.now() - start);
  fs.closeSync(fd);
  fs.rmSync(path);
  return rate;
}

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

    const rawWrite = rawWriteRate(tmp('raw-write'), SMALL, ms);
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
