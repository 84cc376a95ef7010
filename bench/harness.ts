/**
 * The benchmark harness's shared shapes. Each suite (bench/*.bench.ts) exports
 * `suite: BenchSuite`; bench/main.ts runs them and prints a table, or with
 * `--json` one object per line: `{ name, unit, value, baseline?, ratio? }`.
 *
 * A disk figure is always reported beside a raw baseline measured in the same
 * run, and the ratio (figure / baseline) is the number to quote: the machine is
 * shared, so absolute rates drift between runs while ratios hold.
 */
import { join } from 'node:path';

/**
 * Where benchmarks put their scratch directories (FERRY_BENCH_DIR, default
 * `.bench-tmp` under the working directory), each named
 * `<what>-<pid>-XXXXXX` so a later run can sweep those of a stopped one
 * (bench/leftovers.ts).
 */
export const BENCH_DIR = process.env.FERRY_BENCH_DIR ?? join(process.cwd(), '.bench-tmp');

export interface BenchResult {
  /** Dotted name, e.g. `diskqueue.add.nosync`. */
  name: string;
  /** Unit of `value`, e.g. `ops/s`, `MiB/s`, `ms`. */
  unit: string;
  value: number;
  /** The raw twin's figure in the same unit, when there is one. */
  baseline?: number;
  /** value / baseline. */
  ratio?: number;
  /** Extra figures (percentiles, counts) printed beside the main one. */
  extra?: Record<string, number>;
}

export interface BenchContext {
  /** Scratch directory on the disk under test; removed after the run. */
  tmpDir: string;
  /** Scale factor from `--quick` (0.1) or 1. Suites shrink their sizes by it. */
  scale: number;
  report(r: BenchResult): void;
}

export interface BenchSuite {
  /** Prefix of the names it reports, used by `npm run bench -- <filter>`. */
  name: string;
  run(ctx: BenchContext): Promise<void>;
}

/** Builds a result with its ratio filled in. */
export function withBaseline(name: string, unit: string, value: number, baseline: number, extra?: Record<string, number>): BenchResult {
  return { name, unit, value, baseline, ratio: baseline > 0 ? value / baseline : undefined, extra };
}

/** The median of `xs` (the upper one of the middle two for an even count). */
export function median(xs: number[]): number {
  return [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
}

/** Runs `fn` repeatedly for at least `ms` milliseconds; returns operations per second. */
export async function rateFor(ms: number, opsPerCall: number, fn: () => Promise<void> | void): Promise<number> {
  const start = performance.now();
  let ops = 0;
  let now = start;
  while (now - start < ms) {
    await fn();
    ops += opsPerCall;
    now = performance.now();
  }
  return (ops * 1000) / (now - start);
}
