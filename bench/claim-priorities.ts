/**
 * The claim rows of issue 24's priority check alone, without the rest of
 * the `queue.postgres` suite: `node --import tsx bench/claim-priorities.ts
 * [pending] [rounds]` measures `Store.claim` + `ack` deliveries/s with
 * `pending` pending and as many finished rows (default 1,000,000), flat and
 * across 10 priorities, alternating for `rounds` rounds (default 2), and
 * prints each round and the ratio of the medians (10 priorities / flat).
 * Against FERRY_BENCH_POSTGRES_URL (default postgres://localhost/test).
 */
import { userInfo } from 'node:os';
import pg from 'pg';
import { claimRate } from './queue-postgres.bench.js';
import { median } from './harness.js';

const pending = Number(process.argv[2] ?? 1_000_000);
const rounds = Number(process.argv[3] ?? 2);
if (!process.env.PGUSER && !process.env.USER) process.env.PGUSER = userInfo().username;
const admin = new pg.Pool({ connectionString: process.env.FERRY_BENCH_POSTGRES_URL || 'postgres://localhost/test', max: 2 });
const ctx = { tmpDir: '', scale: 1, report: () => undefined };
try {
  const flat: number[] = [];
  const spread: number[] = [];
  for (let r = 0; r < rounds; r++) {
    flat.push(await claimRate(ctx, admin, pending, pending));
    spread.push(await claimRate(ctx, admin, pending, pending, 10));
    process.stdout.write(`round ${r + 1}: flat ${Math.round(flat[r]!)} msgs/s, 10 priorities ${Math.round(spread[r]!)} msgs/s (load ${(await import('node:os')).loadavg()[0]!.toFixed(2)})\n`);
  }
  process.stdout.write(`pending ${pending}, finished ${pending}: median flat ${Math.round(median(flat))}, 10 priorities ${Math.round(median(spread))}, ratio ${(median(spread) / median(flat)).toFixed(2)}\n`);
} finally {
  await admin.end();
}
