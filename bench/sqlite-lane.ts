/**
 * One key lane on the SQLite store, alone: `node --import tsx
 * bench/sqlite-lane.ts [depth] [rounds] [full|normal]` (default 1000, 3,
 * full) publishes `depth` messages on one key (100 per publish, not timed),
 * then drains them with one subscription at concurrency 16, so they run one
 * at a time in publish order; each round on a fresh file. Prints per round
 * the rate, the process's CPU per message (µs), the store calls the drain
 * made, and the load; then the median rate.
 *
 * Every message costs one claim transaction (the ack of the one before it
 * and the claim of it share one, `Store.ackAndClaim`), so the drain can go no
 * faster than the file's commit rate: each round also runs its raw twin, a
 * loop of one-row UPDATE transactions on a file beside it (WAL, the same
 * `synchronous`), and prints the drain's rate as a ratio of that. Until
 * schema version 8 the claim walked every live row of the lane behind its
 * head, so the CPU per message grew with `depth`; now it should not.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { createStoreQueue } from '../src/queue/engine.js';
import { SqliteStore } from '../src/queue/stores/sqlite/store.js';
import { BENCH_DIR, median } from './harness.js';

const depth = Number(process.argv[2] ?? 1000);
const rounds = Number(process.argv[3] ?? 3);
const synchronous = process.argv[4] === 'normal' ? 'normal' : 'full';
const BODY = new Uint8Array(1024).fill(7);
const COUNTED = ['claim', 'ackAndClaim', 'ack', 'extend', 'duePairs'] as const;

/** Commits per second of `n` one-row UPDATE transactions on a new file in `dir` (WAL, `synchronous`): the raw twin. */
function rawCommits(dir: string, n: number): number {
  const db = new Database(join(dir, 'raw.db'));
  try {
    db.pragma('journal_mode = WAL');
    db.pragma(`synchronous = ${synchronous}`);
    db.exec('CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER NOT NULL); INSERT INTO t VALUES (1, 0)');
    const bump = db.prepare('UPDATE t SET v = v + 1 WHERE k = 1');
    const tx = db.transaction(() => bump.run());
    const start = performance.now();
    for (let i = 0; i < n; i++) tx.immediate();
    return (n * 1000) / (performance.now() - start);
  } finally {
    db.close();
  }
}

mkdirSync(BENCH_DIR, { recursive: true });
const rates: number[] = [];
const ratios: number[] = [];
for (let r = 1; r <= rounds; r++) {
  const dir = mkdtempSync(join(BENCH_DIR, `lane-${process.pid}-`));
  const store = await SqliteStore.open({ path: join(dir, 'queue.db'), synchronous });
  const calls: Record<string, number> = {};
  for (const m of COUNTED) {
    const f = (store[m] as (...a: unknown[]) => unknown).bind(store);
    (store as unknown as Record<string, unknown>)[m] = (...a: unknown[]) => {
      calls[m] = (calls[m] ?? 0) + 1;
      return f(...a);
    };
  }
  const q = createStoreQueue(store, { onError: () => {} });
  try {
    await (await q.subscribe('lane', 'g', async () => {}, { startFrom: 'earliest' })).close();
    for (let i = 0; i < depth; i += 100) {
      await q.publish(...Array.from({ length: Math.min(100, depth - i) }, () => ({ topic: 'lane', key: 'k', payload: BODY })));
    }
    for (const k of Object.keys(calls)) delete calls[k];
    let handled = 0;
    let done!: () => void;
    const finished = new Promise<void>((resolve) => (done = resolve));
    const cpu0 = process.cpuUsage();
    const start = performance.now();
    const sub = await q.subscribe('lane', 'g', async () => {
      if (++handled === depth) done();
    }, { concurrency: 16 });
    await finished;
    const ms = performance.now() - start;
    const cpu = process.cpuUsage(cpu0);
    await sub.close();
    const rate = (depth * 1000) / ms;
    const raw = rawCommits(dir, Math.min(depth, 2000));
    rates.push(rate);
    ratios.push(rate / raw);
    process.stdout.write(
      `round ${r}: ${Math.round(rate)} msgs/s, ${((cpu.user + cpu.system) / depth).toFixed(0)} µs CPU/msg, raw twin ${Math.round(raw)} commits/s (ratio ${(rate / raw).toFixed(2)}), ` +
        `store calls ${JSON.stringify(calls)}, load ${loadavg()[0]!.toFixed(2)}\n`,
    );
  } finally {
    await q.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
process.stdout.write(`depth ${depth}, synchronous ${synchronous}: median ${Math.round(median(rates))} msgs/s, median ratio to the raw twin ${median(ratios).toFixed(2)}\n`);
