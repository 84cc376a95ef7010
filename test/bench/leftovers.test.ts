/**
 * What a stopped benchmark leaves behind (bench/leftovers.ts) and the bench
 * runner's options (bench/main.ts): schemas and scratch directories of a
 * process that is gone are removed by the next run, those of a live one are
 * kept, and `--help` or a mistyped option runs no suite.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { dropLeftoverSchemas, leftovers, PEERS_NAME, processAlive } from '../../bench/leftovers.js';
import { adminPool, POSTGRES_SKIP } from '../stores/postgres-env.js';

/** The PID of a process that has exited (a child run to its end). */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '0']);
  assert.equal(child.status, 0);
  assert.equal(processAlive(child.pid!), false, 'a PID reused at once: run again');
  return child.pid!;
}

const bench = (args: string[], env: NodeJS.ProcessEnv = {}) =>
  spawnSync(process.execPath, ['--import', 'tsx', 'bench/main.ts', ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 300_000 });

describe('bench leftovers', () => {
  it('picks the bench names whose process is gone, and only those', () => {
    const alive = (pid: number) => pid === 10 || pid === 20;
    const names = [
      'ferry_bench_pub_10_1', // live maker
      'ferry_bench_pub_11_1', // gone
      'ferry_bench_lanes_12', // gone, no counter
      'ferry_bench_idle_20_1000', // live
      'ferry_bench_e2e_13_4', // gone, tag with a digit
      'ferry_t_11_1_abc', // a test schema: never a bench name
      'ferry_bench_', // no PID
      'public',
    ];
    assert.deepEqual(leftovers(names, alive), ['ferry_bench_pub_11_1', 'ferry_bench_lanes_12', 'ferry_bench_e2e_13_4']);
    // bench:peers' schemas: the system's name may hold underscores and digits.
    const peers = ['peers_ferry_nats_r3_jq_11_2', 'peers_pg_boss_jq_10_1', 'peers_graphile_worker_kf_14_7', 'ferry_bench_pub_11_1'];
    assert.deepEqual(leftovers(peers, alive, PEERS_NAME), ['peers_ferry_nats_r3_jq_11_2', 'peers_graphile_worker_kf_14_7']);
  });

  it('tells a live process from one that has exited', () => {
    assert.equal(processAlive(process.pid), true);
    assert.equal(processAlive(deadPid()), false);
  });

  it('drops the schemas of a stopped run and keeps a live run\'s, with two sweeps at once', { skip: POSTGRES_SKIP }, async () => {
    const dead = deadPid();
    const gone = [`ferry_bench_pub_${dead}_1`, `ferry_bench_lanes_${dead}`];
    const kept = `ferry_bench_pub_${process.pid}_1`;
    try {
      for (const s of [...gone, kept]) await adminPool.query(`CREATE SCHEMA "${s}"`);
      await adminPool.query(`CREATE TABLE "${gone[0]}".t (x int)`);
      const [a, b] = await Promise.all([dropLeftoverSchemas(adminPool), dropLeftoverSchemas(adminPool)]);
      // Neither fails on a schema the other dropped first; between them they drop both, and never the live one.
      for (const s of gone) assert.ok(a.includes(s) || b.includes(s), `${s} dropped by a sweep`);
      assert.ok(!a.includes(kept) && !b.includes(kept));
      const { rows } = await adminPool.query<{ nspname: string }>(
        `SELECT nspname FROM pg_namespace WHERE nspname = ANY($1::text[]) ORDER BY nspname`,
        [[...gone, kept]],
      );
      assert.deepEqual(rows.map((r) => r.nspname), [kept]);
    } finally {
      for (const s of [...gone, kept]) await adminPool.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
    }
  });

  it('--help lists the suites and runs none; an unknown option is an error', () => {
    const help = bench(['--help']);
    assert.equal(help.status, 0, help.stderr);
    assert.match(help.stdout, /^usage: npm run bench/);
    assert.match(help.stdout, /suites: .*\bqueue\.idle\b/);
    // Two suite files share the name diskqueue: listed once.
    assert.equal(help.stdout.match(/\bdiskqueue\b(?!\.)/g)?.length, 1);
    assert.doesNotMatch(help.stdout, /msgs\/s/);

    const bad = bench(['--rounds', '3']);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /unknown option --rounds/);
    assert.equal(bad.stdout, '');
  });

  it('removes the scratch directories of a stopped run and keeps a live run\'s', () => {
    const root = mkdtempSync(join(tmpdir(), 'ferry-bench-root-'));
    try {
      const dead = deadPid();
      // Suite names may hold '-' and '.'; bench:peers' directories are swept alike.
      const gone = [`queue.idle-${dead}-a1B2c3`, `sqlite-pages-${dead}-a1B2c3`, `queue.memory.publish-consume-${dead}-Zz09aa`, `peers-${dead}-abcdef`].map((d) => join(root, d));
      const kept = join(root, `sqlite-pages-${process.pid}-a1B2c3`);
      const other = join(root, 'notes');
      for (const d of [...gone, kept, other]) mkdirSync(d);
      // A filter no suite matches: the sweep runs, no suite does.
      const run = bench(['--json', 'no-such-suite'], { FERRY_BENCH_DIR: root });
      assert.equal(run.status, 0, run.stderr);
      assert.equal(run.stdout, '');
      for (const d of gone) assert.equal(existsSync(d), false, d);
      assert.equal(existsSync(kept), true);
      assert.equal(existsSync(other), true);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
