/**
 * Spool figures, mirroring the Go spool's published table, each beside a raw
 * twin measured in the same run on the same disk, with the Go spool's own
 * figure (AMD Ryzen 7 8840HS, ext4 on NVMe, from its README) in `go`:
 *
 * - append: 256 B records, one fdatasync each, vs a pwrite + fdatasync loop;
 * - append_nosync.b10 / .b100 / .b1000: that many appendNoSync then one sync,
 *   vs a plain pwrite loop (no sync);
 * - pop (no commit), pop_commit, pop_commit.commitsync: vs sequential reads of
 *   the same segment files in frame-sized reads, in records/s;
 * - pop_batch.b100 / .b100.commitsync: `popBatch(100)` then one
 *   `commitBatch` for the 100 (one cursor write, and with commitSync one
 *   fdatasync, per batch), beside the serial pop rows and the same raw twin.
 *
 * Every run passes explicit segmentBytes and maxBytes: a benchmark leaning on
 * the default cap would measure the cap.
 */
import * as fs from 'node:fs';
import { join } from 'node:path';
import { Spool, UNBOUNDED } from '../src/spool/index.js';
import { withBaseline, type BenchContext, type BenchSuite } from './harness.js';
import { payload, rawDurableRate, rawWriteRate } from './raw.js';

const SIZE = 256;
const OPTS = { segmentBytes: 8 << 20, maxBytes: UNBOUNDED };
/** The Go spool's records/s, for the report. */
const GO = { append: 875, b10: 8_400, b100: 71_000, b1000: 358_000, pop: 746_000, popCommit: 331_000, popCommitSync: 880 };

async function appendRate(dir: string, group: number, ms: number): Promise<number> {
  const s = await Spool.open(dir, OPTS);
  const rec = payload(SIZE);
  let n = 0;
  const start = performance.now();
  while (performance.now() - start < ms) {
    if (group === 0) {
      await s.append(rec);
      n++;
    } else {
      for (let i = 0; i < group; i++) await s.appendNoSync(rec);
      await s.sync();
      n += group;
    }
  }
  const rate = (n * 1000) / (performance.now() - start);
  await s.close();
  fs.rmSync(dir, { recursive: true, force: true });
  return rate;
}

/** Fills a spool with `count` records; returns the raw sequential-read rate over its files in records/s. */
async function filled(dir: string, count: number): Promise<number> {
  const s = await Spool.open(dir, OPTS);
  const rec = payload(SIZE);
  for (let i = 0; i < count; i++) await s.appendNoSync(rec);
  await s.close();
  const buf = new Uint8Array(12 + SIZE);
  let n = 0;
  const start = performance.now();
  for (const f of fs.readdirSync(dir).filter((x) => x.endsWith('.seg')).sort()) {
    const fd = fs.openSync(join(dir, f), 'r');
    for (let pos = 8; fs.readSync(fd, buf, 0, buf.length, pos) === buf.length; pos += buf.length) n++;
    fs.closeSync(fd);
  }
  return (n * 1000) / (performance.now() - start);
}

async function popRate(dir: string, mode: 'pop' | 'commit' | 'commitsync' | 'batch' | 'batchsync', count: number, ms: number): Promise<number> {
  const s = await Spool.open(dir, { ...OPTS, commitSync: mode === 'commitsync' || mode === 'batchsync' });
  let n = 0;
  const start = performance.now();
  while (n < count && performance.now() - start < ms) {
    if (mode === 'batch' || mode === 'batchsync') {
      const batch = await s.popBatch(100);
      if (batch.length === 0) break;
      await s.commitBatch(batch);
      n += batch.length;
      continue;
    }
    const p = await s.pop();
    if (!p) break;
    if (mode !== 'pop') await p.commit();
    n++;
  }
  const rate = (n * 1000) / (performance.now() - start);
  await s.close();
  return rate;
}

export const suite: BenchSuite = {
  name: 'spool',
  async run(ctx: BenchContext) {
    const ms = Math.max(300, 2000 * ctx.scale);
    const tmp = (n: string) => join(ctx.tmpDir, n);
    const rawDurable = await rawDurableRate(tmp('raw-durable'), SIZE, ms);
    ctx.report(withBaseline('spool.append', 'ops/s', await appendRate(tmp('a'), 0, ms), rawDurable, { recordBytes: SIZE, go: GO.append }));
    const rawWrite = rawWriteRate(tmp('raw-write'), SIZE, ms);
    for (const [g, go] of [[10, GO.b10], [100, GO.b100], [1000, GO.b1000]] as const) {
      ctx.report(withBaseline(`spool.append_nosync.b${g}`, 'ops/s', await appendRate(tmp(`b${g}`), g, ms), rawWrite, { recordBytes: SIZE, go }));
    }
    // Each pop row reads a spool of its own, filled alike: sharing one, a
    // fast row would leave the next one an empty spool to measure.
    const count = Math.max(20_000, Math.round(400_000 * ctx.scale));
    const rows = [
      ['spool.pop', 'pop', { go: GO.pop }],
      ['spool.pop_commit', 'commit', { go: GO.popCommit }],
      ['spool.pop_commit.commitsync', 'commitsync', { go: GO.popCommitSync }],
      ['spool.pop_batch.b100', 'batch', { batch: 100 }],
      ['spool.pop_batch.b100.commitsync', 'batchsync', { batch: 100 }],
    ] as const;
    for (const [name, mode, extra] of rows) {
      const dir = tmp(`pop-${mode}`);
      const rawRead = await filled(dir, count);
      ctx.report(withBaseline(name, 'ops/s', await popRate(dir, mode, count, ms), rawRead, extra));
      fs.rmSync(dir, { recursive: true, force: true });
    }
  },
};
