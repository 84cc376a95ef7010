/**
 * Workload 2, deep backlog: `backlog` × 1 KiB jobs put in place pending
 * (each system's bulk path: SQL into ferry's tables, graphile-worker's
 * `add_jobs` over generate_series, pg-boss `insert` and BullMQ `addBulk` in
 * large chunks), then one consumer process with concurrency 16 and a no-op
 * handler; `backlog.consume` is msgs/s over the first `messages` handled.
 * The report sets it beside the same system's empty-table figure
 * (`jobqueue.p1.noop.consume`).
 *
 * Between the fill and the consumers, the Postgres server is settled for
 * every system alike (`settle`), as a server's autovacuum and checkpointer
 * would settle it after a bulk load.
 */
import pg from 'pg';
import { PG_URL } from './common.js';
import type { Report, RunOptions } from './common.js';
import type { JobSystem } from './job-system.js';
import { Consumers } from './procs.js';
import { freshNamespace } from './systems.js';

export async function backlogRun(system: JobSystem, opts: RunOptions, report: Report): Promise<void> {
  const ns = freshNamespace(system, 'bl');
  const inst = await system.create(ns, false);
  let consumers: Consumers | undefined;
  try {
    const fillStart = performance.now();
    await inst.fill(opts.backlog);
    const fillRate = (opts.backlog * 1000) / (performance.now() - fillStart);
    await settle();
    consumers = await Consumers.start({ system: system.name, ns, keyed: false, processes: 1, concurrency: 16, handlerMs: 0 });
    const n = Math.min(opts.messages, opts.backlog);
    const start = performance.now();
    consumers.go();
    const end = await consumers.waitFor('handled', n, 600_000);
    report({ name: 'backlog.consume', system: system.name, unit: 'msgs/s', value: (n * 1000) / (end - start), extra: { backlog: opts.backlog, fill_msgs_s: fillRate } });
  } finally {
    await consumers?.stop();
    await inst.close();
    await system.drop(ns);
  }
}

/**
 * `VACUUM ANALYZE` of the whole database, then a `CHECKPOINT`, run after
 * every system's fill (a Redis-backed one included, where it finds little to
 * do). Without it the consume measured the fill's aftermath, unevenly: the
 * fill's gigabyte of WAL starts a checkpoint that writes while the consumer
 * runs, the first reader of each filled row pays for setting its hint bits,
 * and a table no one analyzed is planned from guesses. graphile-worker's
 * rounds then ranged from 9,370 to 17,468 msgs/s in one evening.
 */
async function settle(): Promise<void> {
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    await admin.query('VACUUM ANALYZE');
    await admin.query('CHECKPOINT');
  } finally {
    await admin.end();
  }
}
