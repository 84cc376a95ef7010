/**
 * Workload 1, job queue on Postgres (BullMQ on Redis as the reference). For
 * each system, in 1 and in 4 consumer processes, with a no-op and a 1 ms
 * handler, each run on a fresh schema / prefix:
 *
 * 1. publish `messages` × 1 KiB in batches of 100 from this process, no
 *    consumer running: `jobqueue.publish` (msgs/s);
 * 2. start the consumers (concurrency 16 each) and time until every message
 *    was handled: `jobqueue.pN.<handler>.consume` (msgs/s, to the last
 *    handler's return);
 * 3. with the consumers still running, publish `messages / 5` more in
 *    batches of 100, at most 1,024 unhandled at a time, and record the
 *    publish-to-handler latency: `jobqueue.pN.<handler>.live` (msgs/s, with
 *    p50_ms / p99_ms).
 */
import { wallMs } from './common.js';
import type { JobMessage, Report, RunOptions } from './common.js';
import type { JobSystem } from './job-system.js';
import { percentiles } from './percentile.js';
import { Consumers } from './procs.js';
import { freshNamespace } from './systems.js';

const BATCH = 100;
const WINDOW = 1024;
const TIMEOUT_MS = 600_000;

export async function publishAll(inst: { publish(m: JobMessage[]): Promise<void> }, msgs: JobMessage[]): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < msgs.length; i += BATCH) await inst.publish(msgs.slice(i, i + BATCH));
  return (msgs.length * 1000) / (performance.now() - start);
}

export async function jobQueueRun(system: JobSystem, processes: number, handlerMs: number, opts: RunOptions, report: Report): Promise<void> {
  const ns = freshNamespace(system, 'jq');
  const row = `jobqueue.p${processes}.${handlerMs ? '1ms' : 'noop'}`;
  const inst = await system.create(ns, false);
  let consumers: Consumers | undefined;
  try {
    const total = opts.messages;
    const now = wallMs();
    const rate = await publishAll(inst, Array.from({ length: total }, () => ({ sent: now })));
    report({ name: 'jobqueue.publish', system: system.name, unit: 'msgs/s', value: rate });

    consumers = await Consumers.start({ system: system.name, ns, keyed: false, processes, concurrency: 16, handlerMs });
    const start = performance.now();
    consumers.go();
    const end = await consumers.waitFor('handled', total, TIMEOUT_MS);
    report({ name: `${row}.consume`, system: system.name, unit: 'msgs/s', value: (total * 1000) / (end - start) });

    const live = Math.max(1000, Math.round(total / 5));
    consumers.live(wallMs());
    const base = consumers.handled;
    const liveStart = performance.now();
    for (let published = 0; published < live; ) {
      if (published - (consumers.handled - base) >= WINDOW) {
        await consumers.waitFor('handled', base + published - WINDOW + BATCH, TIMEOUT_MS);
        continue;
      }
      const n = Math.min(BATCH, live - published);
      const sent = wallMs();
      await inst.publish(Array.from({ length: n }, () => ({ sent })));
      published += n;
    }
    const liveEnd = await consumers.waitFor('handled', base + live, TIMEOUT_MS);
    const { latencies } = await consumers.stop();
    consumers = undefined;
    report({ name: `${row}.live`, system: system.name, unit: 'msgs/s', value: (live * 1000) / (liveEnd - liveStart), extra: { ...percentiles(latencies), messages: live } });
  } finally {
    await consumers?.stop();
    await inst.close();
    await system.drop(ns);
  }
}
