/**
 * What a job-queue adapter (ferry `postgres`, pg-boss, graphile-worker,
 * BullMQ) gives the Postgres workloads. An adapter file names the system, its
 * version and settings, and what it does and does not guarantee; the workload
 * files drive every system through this one shape.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { JobMessage } from './common.js';

/** What the handler sees of a job. */
export interface HandledJob extends JobMessage {}

export interface ConsumeSpec {
  /** Handlers running at once in this process. */
  concurrency: number;
  /** Throwing fails the attempt; the system retries it. */
  handler: (job: HandledJob) => Promise<void>;
}

export interface Consumer {
  /** Stops fetching and waits for running handlers. */
  close(): Promise<void>;
}

export interface JobInstance {
  /** Publishes one batch in one call of the system's batch API. */
  publish(msgs: JobMessage[]): Promise<void>;
  /** Puts `n` pending 1 KiB jobs in place as fast as the system allows (SQL where its schema allows). */
  fill(n: number): Promise<void>;
  consume(spec: ConsumeSpec): Promise<Consumer>;
  close(): Promise<void>;
}

export interface JobSystem {
  /** Short name used in rows and in the document. */
  name: string;
  /** Packages whose versions the document lists. */
  packages: string[];
  /** Settings used, each with the system's default beside it. */
  settings: Array<{ setting: string; value: string; default: string }>;
  /** What the system guarantees that differs from ferry, in full, or '' when nothing. */
  caveats: string;
  /** The same in a few words each, for table rows: missing fencing, fsync. */
  differs: string[];
  /** In a few words, how its per-key order falls short of ferry's, or ''. */
  keyOrder: string;
  /** Whether the per-key FIFO workload runs on it. */
  keyed: boolean;
  /** Whether the deep-backlog workload runs on it (it needs `fill`); default true. */
  fills?: boolean;
  /** Creates the namespace `ns` (schema / prefix) fresh; `keyed` selects the per-key-order mode. */
  create(ns: string, keyed: boolean): Promise<JobInstance>;
  /** Connects to an existing namespace (in a consumer process). */
  connect(ns: string, keyed: boolean): Promise<JobInstance>;
  /** Removes the namespace and everything in it. */
  drop(ns: string): Promise<void>;
}

const require = createRequire(import.meta.url);

/** Version of an installed package, read from its package.json. */
export function packageVersion(name: string): string {
  let dir = dirname(require.resolve(name));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === name && pkg.version) return pkg.version;
    } catch {
      /* keep walking up */
    }
    const up = dirname(dir);
    if (up === dir) return 'unknown';
    dir = up;
  }
}
