/**
 * What many subscriptions cost (suite `queue.idle`): the engine's
 * shared poller (src/queue/due-poller.ts) against one claim per subscription
 * per poll interval. Default options (`pollIntervalMs` 1 s).
 *
 * - `queue.idle.<store>.<n>`: CPU of this process, as % of one core, over a
 *   fixed window while `n` subscriptions (n topics, one group each) sit idle
 *   on SQLite (a file) or Postgres (FERRY_BENCH_POSTGRES_URL). The database
 *   server's own CPU is not counted. `extra.load1`: the 1-minute load average
 *   when the window ended.
 * - `queue.latency.sqlite.<n>`: publish-to-handler p50/p99 (ms) of 200
 *   messages published one at a time to one subscription while `n - 1`
 *   others sit idle; the `.3000` row's ratio is to `.3` of the same run.
 * - `queue.fanout.2000x3` / `.restart` (SQLite): 2,000 topics × 3 groups
 *   subscribed, one message published to each topic, seconds until all 6,000
 *   deliveries ran (capped at FERRY_BENCH_FANOUT_CAP_MS, default 120 s; `extra.delivered` tells how many did); then the
 *   queue is closed and a new one on the same file does the same again.
 *   `.nosync`: the same with `synchronous: 'normal'` (no WAL sync per commit).
 *   `extra.subscribeS`: the seconds the 6,000 subscribes took; `extra.cpuS`:
 *   this process's CPU seconds from the first publish to the last delivery
 *   (on a loaded machine the wall time is mostly waiting for a core).
 *
 * `--quick` scales the counts and windows by 0.1 (at least 100 subscriptions).
 */
import { cpus, loadavg, userInfo } from 'node:os';
import { join } from 'node:path';
import hdr from 'hdr-histogram-js';
import type { BenchContext, BenchSuite } from './harness.js';
import { dropLeftoverSchemas } from './leftovers.js';
import { createStoreQueue } from '../src/queue/engine.js';
import { SqliteStore } from '../src/queue/stores/sqlite/store.js';
import type { Queue, Store } from '../src/queue/types.js';

const URL = process.env.FERRY_BENCH_POSTGRES_URL || 'postgres://localhost/test';
const PAYLOAD = new Uint8Array(64).fill(7);
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

let files = 0;
async function sqlite(ctx: BenchContext): Promise<Store> {
  return SqliteStore.open({ path: join(ctx.tmpDir, `idle-${++files}.db`) });
}

/** Subscribes `n` (topic, group) pairs, 200 at a time. */
async function subscribeAll(q: Queue, pairs: Array<[string, string]>, handler: (topic: string) => void): Promise<void> {
  for (let i = 0; i < pairs.length; i += 200) {
    await Promise.all(pairs.slice(i, i + 200).map(([t, g]) => q.subscribe(t, g, async (d) => handler(d.topic))));
  }
}

/** % of one core this process used over `ms`. */
async function cpuOver(ms: number): Promise<number> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await sleep(ms);
  const c = process.cpuUsage(c0);
  return ((c.user + c.system) / 1000 / (performance.now() - t0)) * 100;
}

async function idleCpu(ctx: BenchContext, name: string, n: number, open: () => Promise<Store>, cleanup: () => Promise<void>): Promise<void> {
  const q = createStoreQueue(await open());
  try {
    const pairs = Array.from({ length: n }, (_, i): [string, string] => [`idle${i}`, 'g']);
    await subscribeAll(q, pairs, () => undefined);
    await sleep(3000); // the first claims and the janitor's first pass are over
    const pct = await cpuOver(Math.max(3000, 10_000 * ctx.scale));
    ctx.report({ name, unit: '%core', value: pct, extra: { subscriptions: n, load1: loadavg()[0]!, cores: cpus().length } });
  } finally {
    await q.close({ timeoutMs: 5000 }).catch(() => undefined);
    await cleanup();
  }
}

async function latency(ctx: BenchContext, n: number): Promise<number> {
  const q = createStoreQueue(await sqlite(ctx));
  try {
    const pairs = Array.from({ length: n - 1 }, (_, i): [string, string] => [`idle${i}`, 'g']);
    await subscribeAll(q, pairs, () => undefined);
    let arrived: (() => void) | undefined;
    await q.subscribe('lat', 'g', async () => arrived?.());
    await sleep(3000);
    const h = hdr.build();
    for (let i = 0; i < 200; i++) {
      const got = new Promise<void>((resolve) => (arrived = resolve));
      const t0 = performance.now();
      await q.publish({ topic: 'lat', payload: PAYLOAD });
      await got;
      h.recordValue(Math.max(1, Math.round((performance.now() - t0) * 1000)));
    }
    const p50 = h.getValueAtPercentile(50) / 1000;
    const row = { name: `queue.latency.sqlite.${n}`, unit: 'ms', value: p50, extra: { p99: h.getValueAtPercentile(99) / 1000, load1: loadavg()[0]! } };
    ctx.report(row);
    return p50;
  } finally {
    await q.close({ timeoutMs: 5000 }).catch(() => undefined);
  }
}

/** 2,000 topics × 3 groups, one message each; resolves with seconds to deliver all (or the cap) and how many were. */
async function fanoutRound(path: string, synchronous: 'full' | 'normal', topics: number, capMs: number): Promise<{ s: number; delivered: number; subscribeS: number; cpuS: number }> {
  const q = createStoreQueue(await SqliteStore.open({ path, synchronous }));
  try {
    let delivered = 0;
    const pairs: Array<[string, string]> = [];
    for (let t = 0; t < topics; t++) for (const g of ['a', 'b', 'c']) pairs.push([`fan${t}`, g]);
    const s0 = performance.now();
    await subscribeAll(q, pairs, () => void delivered++);
    const subscribeS = (performance.now() - s0) / 1000;
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    for (let t = 0; t < topics; t += 100) {
      await q.publish(...Array.from({ length: Math.min(100, topics - t) }, (_, i) => ({ topic: `fan${t + i}`, payload: PAYLOAD })));
    }
    const want = topics * 3;
    while (delivered < want && performance.now() - t0 < capMs) await sleep(20);
    const c = process.cpuUsage(c0);
    return { s: (performance.now() - t0) / 1000, delivered, subscribeS, cpuS: (c.user + c.system) / 1e6 };
  } finally {
    await q.close({ timeoutMs: 5000 }).catch(() => undefined);
  }
}

export const suite: BenchSuite = {
  name: 'queue.idle',
  async run(ctx) {
    const counts = [1000, 10_000].map((n) => Math.max(100, Math.round(n * ctx.scale)));
    for (const n of counts) await idleCpu(ctx, `queue.idle.sqlite.${n}`, n, () => sqlite(ctx), async () => undefined);
    const { PostgresStore } = await import('../src/queue/stores/postgres/store.js');
    const pg = (await import('pg')).default;
    if (!process.env.PGUSER && !process.env.USER) process.env.PGUSER = userInfo().username;
    const admin = new pg.Pool({ connectionString: URL, max: 1 });
    try {
      await admin.query('SELECT 1');
      await dropLeftoverSchemas(admin);
      for (const n of counts) {
        const schema = `ferry_bench_idle_${process.pid}_${n}`;
        await idleCpu(ctx, `queue.idle.postgres.${n}`, n, () => PostgresStore.open({ connectionString: URL, schema }),
          async () => void (await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)));
      }
    } catch (err) {
      process.stderr.write(`queue.idle.postgres skipped: ${(err as Error).message}\n`);
    } finally {
      await admin.end();
    }
    const few = await latency(ctx, 3);
    const many = Math.max(100, Math.round(3000 * ctx.scale));
    const p50 = await latency(ctx, many);
    ctx.report({ name: `queue.latency.sqlite.${many}.vs3`, unit: 'x', value: p50 / few });
    const topics = Math.max(200, Math.round(2000 * ctx.scale));
    const capMs = Number(process.env.FERRY_BENCH_FANOUT_CAP_MS ?? 120_000);
    // synchronous FULL (the default) syncs the WAL at every commit: each of the 6,000 claims and their acks;
    // NORMAL shows what is left without those syncs.
    for (const sync of ['full', 'normal'] as const) {
      const path = join(ctx.tmpDir, `fanout-${sync}.db`);
      for (const tag of ['', '.restart']) {
        const r = await fanoutRound(path, sync, topics, capMs);
        const name = `queue.fanout.${topics}x3${sync === 'normal' ? '.nosync' : ''}${tag}`;
        ctx.report({ name, unit: 's', value: r.s, extra: { delivered: r.delivered, cpuS: r.cpuS, subscribeS: r.subscribeS, load1: loadavg()[0]! } });
      }
    }
  },
};
