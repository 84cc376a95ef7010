/**
 * What priorities cost a claim on the SQLite store (suite `queue.priority`):
 * one group with a backlog of `PENDING` messages (1,000,000; `--quick`:
 * 100,000; FERRY_BENCH_PRIORITY_PENDING to choose), all due, 16-byte
 * payloads, `synchronous = normal` so the walk rather than the fsync of each
 * commit is what is timed. The store calls are made directly (no engine).
 *
 * - `queue.priority.sqlite.flat`: deliveries/s of claim (10 at a time) then
 *   ack, every message at priority 0: the claim walks publish order and makes
 *   delivery rows a chunk at a time as it goes.
 * - `queue.priority.sqlite.levels10`: the same with priorities 0–9 spread
 *   round-robin over the backlog, after one untimed claim that made every
 *   row (see `.first-claim`); its ratio is to `.flat` of the same run (above
 *   1 is faster). The claim walks the live index in priority order, so its
 *   cost should not grow with the backlog.
 * - `.maxInFlight` of both: the same with `maxInFlight` 1,000, which makes each
 *   claim count the group's unexpired leases.
 * - `queue.priority.sqlite.levels10.first-claim`: ms of the first claim on the
 *   prioritised backlog (it makes the group's rows up to the newest raised
 *   message, a few thousand per transaction); its baseline is the first
 *   claim on the flat one. `extra.fillS`: seconds the publishes of the
 *   backlog took.
 */
import { join } from 'node:path';
import { rateFor, withBaseline } from './harness.js';
import type { BenchContext, BenchSuite } from './harness.js';
import { SqliteStore } from '../src/queue/stores/sqlite/store.js';
import type { ClaimRequest, StoredMessage } from '../src/queue/types.js';

const PAYLOAD = new Uint8Array(16).fill(7);
const LEVELS = 10;
const FILL_BATCH = 10_000;

/** A store holding `n` due messages on topic `t` for group `g`, priorities from `priorityOf`. */
async function filled(ctx: BenchContext, tag: string, n: number, priorityOf: (i: number) => number): Promise<{ store: SqliteStore; fillS: number }> {
  const store = await SqliteStore.open({ path: join(ctx.tmpDir, `${tag}.db`), synchronous: 'normal' });
  await store.ensureGroup('t', 'g', 'earliest');
  const t0 = performance.now();
  const at = new Date();
  for (let i = 0; i < n; i += FILL_BATCH) {
    const batch: StoredMessage[] = [];
    for (let j = i; j < Math.min(n, i + FILL_BATCH); j++) {
      const m: StoredMessage = { id: `m${String(j).padStart(8, '0')}`, topic: 't', payload: PAYLOAD, publishedAt: at };
      const p = priorityOf(j);
      if (p !== 0) m.priority = p;
      batch.push(m);
    }
    await store.append(batch);
  }
  return { store, fillS: (performance.now() - t0) / 1000 };
}

const request = (maxInFlight: number): ClaimRequest => ({ topic: 't', group: 'g', runnerId: 'bench', max: 10, leaseMs: 600_000, maxInFlight });

/** Deliveries/s of claim-then-ack over `ms`. */
function drainRate(store: SqliteStore, ms: number, maxInFlight: number): Promise<number> {
  const req = request(maxInFlight);
  let claimed = 0;
  let calls = 0;
  return rateFor(ms, 10, async () => {
    const got = await store.claim(req);
    claimed += got.length;
    calls++;
    await store.ack(got);
  }).then((rate) => {
    if (claimed !== calls * 10) throw new Error(`bench: a claim came back short (${claimed} of ${calls * 10}): the backlog ran out`);
    return rate;
  });
}

/** ms of one call of `fn`. */
async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

export const suite: BenchSuite = {
  name: 'queue.priority',
  async run(ctx) {
    const pending = Number(process.env.FERRY_BENCH_PRIORITY_PENDING ?? Math.round(1_000_000 * ctx.scale));
    const ms = Math.max(500, 3000 * ctx.scale);
    const flat = await filled(ctx, 'flat', pending, () => 0);
    const levels = await filled(ctx, 'levels', pending, (i) => i % LEVELS);
    try {
      const flatFirst = await timed(() => flat.store.claim(request(0)));
      const levelsFirst = await timed(() => levels.store.claim(request(0)));
      ctx.report(withBaseline('queue.priority.sqlite.levels10.first-claim', 'ms', levelsFirst, flatFirst, { pending, fillS: levels.fillS, flatFillS: flat.fillS }));
      // Alternate the two, so a change in the machine's load falls on both.
      const rates = { flat: [] as number[], levels: [] as number[], flatCap: [] as number[], levelsCap: [] as number[] };
      for (let round = 0; round < 2; round++) {
        rates.flat.push(await drainRate(flat.store, ms / 2, 0));
        rates.levels.push(await drainRate(levels.store, ms / 2, 0));
        rates.flatCap.push(await drainRate(flat.store, ms / 2, 1000));
        rates.levelsCap.push(await drainRate(levels.store, ms / 2, 1000));
      }
      const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
      ctx.report({ name: 'queue.priority.sqlite.flat', unit: 'msgs/s', value: mean(rates.flat), extra: { pending } });
      ctx.report(withBaseline('queue.priority.sqlite.levels10', 'msgs/s', mean(rates.levels), mean(rates.flat), { pending }));
      ctx.report({ name: 'queue.priority.sqlite.flat.maxInFlight', unit: 'msgs/s', value: mean(rates.flatCap), extra: { pending } });
      ctx.report(withBaseline('queue.priority.sqlite.levels10.maxInFlight', 'msgs/s', mean(rates.levelsCap), mean(rates.flatCap), { pending }));
    } finally {
      await flat.store.close();
      await levels.store.close();
    }
  },
};
