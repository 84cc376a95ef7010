/**
 * A consumer process of the Postgres workloads (forked by bench/peers/procs.ts).
 * argv: system name, namespace, keyed (0/1), concurrency, handler delay in ms,
 * failing key ('' for none).
 *
 * It connects, says `ready`, starts consuming on `go`, and reports handled
 * counts every 10 ms (`n`: all, `other`: keys other than the failing one).
 * After `live` (with an instant), it records publish-to-handler latency of
 * messages sent from then on. On `stop` it closes and answers `result` with
 * those latencies and the per-key order violations it saw.
 */
import { sleep, wallMs } from './common.js';
import type { HandledJob } from './job-system.js';
import { jobSystem } from './systems.js';

const [name, ns, keyedArg, concArg, delayArg, failKey] = process.argv.slice(2);
const system = jobSystem(name!);
const keyed = keyedArg === '1';
const concurrency = Number(concArg);
const delay = Number(delayArg);

let handled = 0;
let other = 0;
let flushed = 0;
let flushedOther = 0;
let liveSince = Infinity;
const latencies: number[] = [];
const nextSeq = new Map<string, number>();
let violations = 0;
let failedOnce = false;

const send = (m: unknown) => process.send!(m);

async function handler(job: HandledJob): Promise<void> {
  if (job.sent >= liveSince) latencies.push(wallMs() - job.sent);
  if (delay > 0) await sleep(delay);
  if (job.key !== undefined && job.seq !== undefined) {
    if (job.key === failKey && job.seq === 0 && !failedOnce) {
      failedOnce = true;
      throw new Error('first attempt of the failing key fails');
    }
    const expected = nextSeq.get(job.key) ?? 0;
    if (job.seq !== expected) violations++;
    nextSeq.set(job.key, Math.max(expected, job.seq + 1));
    if (job.key !== failKey) other++;
  } else {
    other++;
  }
  handled++;
}

const instance = await system.connect(ns!, keyed);
let consumer: { close(): Promise<void> } | undefined;
const timer = setInterval(() => {
  if (handled !== flushed || other !== flushedOther) {
    send({ type: 'n', n: handled - flushed, other: other - flushedOther });
    flushed = handled;
    flushedOther = other;
  }
}, 10);

process.on('message', (m: { type: string; since?: number }) => {
  void (async () => {
    if (m.type === 'go') {
      consumer = await instance.consume({ concurrency, handler });
    } else if (m.type === 'live') {
      liveSince = m.since!;
    } else if (m.type === 'stop') {
      await consumer?.close();
      await instance.close();
      clearInterval(timer);
      send({ type: 'n', n: handled - flushed, other: other - flushedOther });
      send({ type: 'result', latencies, violations });
      process.disconnect();
      setTimeout(() => process.exit(0), 200).unref();
    }
  })().catch((err) => {
    process.stderr.write(`consumer ${name}: ${(err as Error).stack}\n`);
    process.exit(1);
  });
});
send({ type: 'ready' });
