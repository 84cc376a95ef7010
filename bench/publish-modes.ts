/**
 * Publish rates by how producers call `publish`, 1 KiB payloads, to a topic
 * with one group, reported as `<prefix>.single` (one producer, one message
 * per call), `<prefix>.concurrent64` (64 producers in this process, one
 * message per call each; its baseline is `.single`, so the ratio is what group
 * commit buys) and `<prefix>.batch100` (one producer, 100 messages per call).
 */
import { rateFor, withBaseline } from './harness.js';
import type { BenchContext } from './harness.js';
import type { Message, Queue } from '../src/queue/types.js';

const PAYLOAD = new Uint8Array(1024).fill(7);
const one = (): Message => ({ topic: 'bench', payload: PAYLOAD });

/** Runs `producers` loops of `publish(one message)` for `ms`; messages/s. */
async function concurrentRate(q: Queue, producers: number, ms: number): Promise<number> {
  const start = performance.now();
  let n = 0;
  await Promise.all(
    Array.from({ length: producers }, async () => {
      while (performance.now() - start < ms) {
        await q.publish(one());
        n++;
      }
    }),
  );
  return (n * 1000) / (performance.now() - start);
}

/** `open` gives a fresh queue whose topic `bench` has one group; each mode gets its own and closes it. */
export async function reportPublishModes(ctx: BenchContext, prefix: string, open: (tag: string) => Promise<Queue>): Promise<void> {
  const ms = Math.max(500, 3000 * ctx.scale);
  const run = async (tag: string, fn: (q: Queue) => Promise<number>) => {
    const q = await open(tag);
    try {
      return await fn(q);
    } finally {
      await q.close();
    }
  };
  const single = await run('single', (q) => concurrentRate(q, 1, ms));
  ctx.report({ name: `${prefix}.single`, unit: 'msgs/s', value: single });
  const c64 = await run('c64', (q) => concurrentRate(q, 64, ms));
  ctx.report(withBaseline(`${prefix}.concurrent64`, 'msgs/s', c64, single));
  const batch = await run('batch', (q) => rateFor(ms, 100, () => q.publish(...Array.from({ length: 100 }, one)).then(() => undefined)));
  ctx.report({ name: `${prefix}.batch100`, unit: 'msgs/s', value: batch });
}
