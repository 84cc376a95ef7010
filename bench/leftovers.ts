/**
 * Schemas and databases a benchmark left behind. Every bench schema (and
 * ClickHouse database) is named `ferry_bench_<tag>_<pid>[_<n>]`, after the
 * process that made it, and dropped by that process when its row is done. A
 * run stopped by Ctrl-C, `kill` or a crash never reaches the drop, so each
 * suite that makes them first drops the ones whose process is gone. The
 * scratch directories under `.bench-tmp` carry the PID too
 * (`<what>-<pid>-XXXXXX`) and are swept the same way (`removeLeftoverDirs`).
 *
 * A process ID says nothing about another host's processes: the sweep runs
 * only against a server on this host (a Unix socket or a loopback address),
 * where a live bench on the same server is a live local process.
 */
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type pg from 'pg';

/** A bench schema or database: `ferry_bench_<tag>_<pid>[_<n>]`; group 1 is the PID. */
export const BENCH_NAME = /^ferry_bench_[a-z][a-z0-9]*_(\d+)(?:_\d+)?$/;
/** A schema of `npm run bench:peers` (bench/peers/systems.ts): `peers_<system>_<tag>_<pid>_<n>`. */
export const PEERS_NAME = /^peers_[a-z0-9_]+_(\d+)_\d+$/;
/** A scratch directory under `.bench-tmp`: `<what>-<pid>-XXXXXX` (mkdtemp's six characters); `<what>` may hold `-` and `.`. */
export const SCRATCH_NAME = /^[a-z][a-z0-9.-]*-(\d+)-[A-Za-z0-9]{6}$/;

/** True when process `pid` exists on this host (EPERM: it exists, under another user). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The names among `names` that a bench process made (`pattern`, whose first
 * group is the maker's PID) and whose process is no longer alive; other
 * names (no match, or a live maker) are kept.
 */
export function leftovers(names: readonly string[], alive: (pid: number) => boolean = processAlive, pattern: RegExp = BENCH_NAME): string[] {
  return names.filter((name) => {
    const m = pattern.exec(name);
    return m !== null && !alive(Number(m[1]));
  });
}

/**
 * Drops the schemas on the server behind `admin` named by `pattern` (bench
 * schemas by default) whose process is gone, when that server is on this
 * host; returns the names it found and dropped (none when the server is
 * remote). One schema at a time, each `IF EXISTS`: two sweeps at once (two
 * suites, two bench processes) never fail on one the other dropped first,
 * which may then be in both answers.
 */
export async function dropLeftoverSchemas(admin: pg.Pool | pg.Client, pattern: RegExp = BENCH_NAME): Promise<string[]> {
  const { rows: where } = await admin.query<{ local: boolean }>(
    `SELECT coalesce(host(inet_server_addr()) IN ('127.0.0.1', '::1'), true) AS local`,
  );
  if (!where[0]?.local) return [];
  const { rows } = await admin.query<{ nspname: string }>('SELECT nspname FROM pg_namespace');
  return dropEach('schema', leftovers(rows.map((r) => r.nspname), processAlive, pattern), (name) => admin.query(`DROP SCHEMA IF EXISTS "${name}" CASCADE`));
}

/** Drops each of `gone` (`kind`: schema, database) with `drop`, one at a time, says so on stderr, and returns `gone`. */
export async function dropEach(kind: string, gone: string[], drop: (name: string) => Promise<unknown>): Promise<string[]> {
  for (const name of gone) await drop(name);
  if (gone.length) process.stderr.write(`bench: dropped ${gone.length} ${kind}(s) left by stopped runs: ${gone.join(', ')}\n`);
  return gone;
}

/**
 * Removes the scratch directories under `root` (`SCRATCH_NAME`) whose process
 * is gone; returns their names. A missing `root` has none.
 */
export function removeLeftoverDirs(root: string): string[] {
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return [];
  }
  const gone = leftovers(names, processAlive, SCRATCH_NAME);
  for (const name of gone) rmSync(join(root, name), { recursive: true, force: true });
  return gone;
}
