/**
 * Workload 4, embedded durable queue, one process, each message durable at
 * the system's setting before its publish returns. Per system, on a fresh
 * directory: `embedded.publish.p1` (one publisher, one message per call,
 * timed after as many untimed: `cold_msgs_s` is their rate),
 * `embedded.publish.p64` (64 concurrent single-message publishers),
 * `embedded.publish.batch100` (one publisher, 100 per call), then
 * `embedded.consume`: everything published, consumed with concurrency 16.
 * A system with other consuming paths (`consumeModes`) then gets one
 * `embedded.consume.<mode>` row per path, each on a fresh directory filled
 * with as many messages (100 per publish, not timed).
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { BENCH_DIR } from '../harness.js';
import type { Report, RunOptions } from './common.js';
import type { EmbeddedSystem } from './embedded-system.js';
import { ferryDiskQueue } from './ferry-diskqueue.js';
import { ferrySpool } from './ferry-spool.js';
import { ferrySqlite, ferrySqliteNormal } from './ferry-sqlite.js';
import { plainjobFull, plainjobNormal } from './plainjob.js';

export const EMBEDDED_SYSTEMS: EmbeddedSystem[] = [ferrySqlite, plainjobFull, ferrySqliteNormal, plainjobNormal, ferryDiskQueue, ferrySpool];

export async function embeddedRun(system: EmbeddedSystem, opts: RunOptions, report: Report): Promise<void> {
  mkdirSync(BENCH_DIR, { recursive: true });
  const dir = mkdtempSync(join(BENCH_DIR, `peers-${process.pid}-`));
  const inst = await system.open(dir);
  const sizes = opts.quick ? { warm: 300, p1: 300, p64: 3000, batch: 5000 } : { warm: 3000, p1: 3000, p64: 20_000, batch: 50_000 };
  let total = 0;
  try {
    // The first publishes of a process also pay for compiling its publish
    // path (ferry's first 2,000 at SQLite FULL cost about twice the CPU of
    // the ones after), so `publish.p1` times the publishes after `warm`
    // untimed ones, and reports the rate of those in `cold_msgs_s`.
    let start = performance.now();
    for (let i = 0; i < sizes.warm; i++) await inst.publishOne();
    const cold = (sizes.warm * 1000) / (performance.now() - start);
    total += sizes.warm;
    start = performance.now();
    for (let i = 0; i < sizes.p1; i++) await inst.publishOne();
    report({ name: 'embedded.publish.p1', system: system.name, unit: 'msgs/s', value: (sizes.p1 * 1000) / (performance.now() - start), extra: { cold_msgs_s: Math.round(cold) } });
    total += sizes.p1;

    if (system.concurrentPublish) {
      let left = sizes.p64;
      start = performance.now();
      await Promise.all(
        Array.from({ length: 64 }, async () => {
          while (left > 0) {
            left--;
            await inst.publishOne();
          }
        }),
      );
      report({ name: 'embedded.publish.p64', system: system.name, unit: 'msgs/s', value: (sizes.p64 * 1000) / (performance.now() - start) });
      total += sizes.p64;
    }

    start = performance.now();
    for (let i = 0; i < sizes.batch; i += 100) await inst.publishBatch(Math.min(100, sizes.batch - i));
    report({ name: 'embedded.publish.batch100', system: system.name, unit: 'msgs/s', value: (sizes.batch * 1000) / (performance.now() - start) });
    total += sizes.batch;

    report({ name: 'embedded.consume', system: system.name, unit: 'msgs/s', value: await inst.drain(total), extra: { messages: total } });
  } finally {
    await inst.close();
    rmSync(dir, { recursive: true, force: true });
  }
  for (const mode of Object.keys(inst.consumeModes ?? {})) await consumeModeRun(system, mode, total, report);
}

/** One `embedded.consume.<mode>` row: a fresh instance, `total` messages published untimed, then consumed by `mode`. */
async function consumeModeRun(system: EmbeddedSystem, mode: string, total: number, report: Report): Promise<void> {
  const dir = mkdtempSync(join(BENCH_DIR, `peers-${process.pid}-`));
  const inst = await system.open(dir);
  try {
    for (let i = 0; i < total; i += 100) await inst.publishBatch(Math.min(100, total - i));
    const value = await inst.consumeModes![mode]!(total);
    report({ name: `embedded.consume.${mode}`, system: system.name, unit: 'msgs/s', value, extra: { messages: total } });
  } finally {
    await inst.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

