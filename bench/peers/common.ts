/**
 * Shapes and helpers shared by the peer benchmarks (`npm run bench:peers`):
 * payloads, timing, the machine's load, and the one-sample-per-round record
 * that bench/peers/report.ts turns into medians, ranges and ratios.
 */
import { readFileSync } from 'node:fs';
import { userInfo } from 'node:os';

/** PostgreSQL the Postgres workloads use; each round gets a schema of its own. */
export const PG_URL = process.env.FERRY_BENCH_POSTGRES_URL || 'postgres://localhost/test';
/** Redis BullMQ uses; each round gets a key prefix of its own. */
export const REDIS_URL = process.env.FERRY_BENCH_REDIS_URL || 'redis://127.0.0.1:6379';

if (!process.env.PGUSER && !process.env.USER) process.env.PGUSER = userInfo().username;

/** 1 KiB message body, as bytes (ferry) or as a string inside a JSON job (the peers). */
export const BODY_BYTES = new Uint8Array(1024).fill(120);
export const BODY_TEXT = 'x'.repeat(1024);

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Wall-clock milliseconds, comparable across processes on one host: the
 * system clock read at each call. (`performance.timeOrigin + now()` is the
 * clock at process start plus a monotonic count, so a process that lived
 * through a step of the system clock disagrees with a younger one by the
 * step: live latencies of whole seconds, the same for every system.)
 */
export const wallMs = () => Date.now();

/** The 1-, 5- and 15-minute load averages from /proc/loadavg. */
export function loadAverage(): [number, number, number] {
  try {
    const [a, b, c] = readFileSync('/proc/loadavg', 'utf8').split(' ').map(Number);
    return [a!, b!, c!];
  } catch {
    return [NaN, NaN, NaN];
  }
}

/** One measurement of one system in one round. */
export interface Sample {
  /** Workload row, e.g. `jobqueue.p1.noop.consume`. */
  name: string;
  /** System measured, e.g. `ferry postgres`, `pg-boss`. */
  system: string;
  unit: string;
  value: number;
  round: number;
  /** /proc/loadavg when the measurement ended. */
  load: [number, number, number];
  extra?: Record<string, number>;
}

export type Report = (s: Omit<Sample, 'load' | 'round'>) => void;

/** Settings a run was started with. */
export interface RunOptions {
  rounds: number;
  quick: boolean;
  json: boolean;
  backlog: number;
  /** Messages per job-queue run (50,000; 5,000 with --quick). */
  messages: number;
  workloads: string[];
}

/** A message as the Postgres/Redis workloads see it, whatever the system. */
export interface JobMessage {
  /** wallMs() at publish; 0 for backlog filler. */
  sent: number;
  key?: string;
  seq?: number;
}
