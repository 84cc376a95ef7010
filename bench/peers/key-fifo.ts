/**
 * Workload 3, per-key FIFO: 1,000 keys × 50 messages (1 KiB), published in
 * batches of 100 either key-major (all of k0, then all of k1, …) or
 * interleaved (message 0 of every key, then message 1, …). The first attempt
 * of k0's first message fails. One consumer process, concurrency 16, no-op
 * handler.
 *
 * `keyfifo.<order>` is msgs/s over the 49,950 messages of the other keys,
 * until the last of them was handled: a system where they stall behind k0
 * shows it here. Extras: `all_s`, seconds until k0 finished too (its retry
 * delay included), and `order_violations`, handlers that ran a key's message
 * before the previous one of that key had succeeded; `unfinished`, messages
 * not handled when the run ended (a stall: the others did not finish within
 * a minute, and the row's value is then missing).
 */
import type { JobMessage, Report, RunOptions } from './common.js';
import { publishAll } from './job-queue.js';
import type { JobSystem } from './job-system.js';
import { Consumers } from './procs.js';
import { freshNamespace } from './systems.js';

const KEYS = 1000;
const PER_KEY = 50;
const FAIL_KEY = 'k0';
/** After this long without the other keys finishing, the run is reported as stalled (value NaN, `unfinished` left). */
const STALL_MS = 45_000;

function messages(order: 'keymajor' | 'interleaved', keys: number): JobMessage[] {
  const out: JobMessage[] = [];
  if (order === 'keymajor') {
    for (let k = 0; k < keys; k++) for (let q = 0; q < PER_KEY; q++) out.push({ sent: 0, key: `k${k}`, seq: q });
  } else {
    for (let q = 0; q < PER_KEY; q++) for (let k = 0; k < keys; k++) out.push({ sent: 0, key: `k${k}`, seq: q });
  }
  return out;
}

export async function keyFifoRun(system: JobSystem, order: 'keymajor' | 'interleaved', opts: RunOptions, report: Report): Promise<void> {
  const keys = opts.quick ? 100 : KEYS;
  const ns = freshNamespace(system, 'kf');
  const inst = await system.create(ns, true);
  let consumers: Consumers | undefined;
  try {
    await publishAll(inst, messages(order, keys));
    consumers = await Consumers.start({ system: system.name, ns, keyed: true, processes: 1, concurrency: 16, handlerMs: 0, failKey: FAIL_KEY });
    const start = performance.now();
    consumers.go();
    const others = (keys - 1) * PER_KEY;
    const othersEnd = await consumers.waitFor('other', others, STALL_MS);
    const allEnd = Number.isNaN(othersEnd) ? NaN : await consumers.waitFor('handled', keys * PER_KEY, 30_000);
    const unfinished = keys * PER_KEY - consumers.handled;
    const { violations } = await consumers.stop();
    consumers = undefined;
    report({
      name: `keyfifo.${order}`,
      system: system.name,
      unit: 'msgs/s',
      value: (others * 1000) / (othersEnd - start),
      extra: { all_s: (allEnd - start) / 1000, order_violations: violations, unfinished, keys },
    });
  } finally {
    await consumers?.stop();
    await inst.close();
    await system.drop(ns);
  }
}
