/**
 * Controlled interleavings: random programs of concurrent DiskQueue calls,
 * with fast-check's scheduler ordering call starts, promise settlements and
 * the seam's fsync completions, against the model in concurrent-model.ts.
 *
 * `FERRY_CONCURRENCY_RUNS` sets the number of random programs (default 300
 * in CI, 1000 under FERRY_LONG=1 / `npm run test:long`; `npm run fuzz` runs
 * 20,000). Every entry of concurrent-corpus.json is replayed
 * first: programs that once failed, each under 200 schedules, and seeds. A
 * failing run prints its seed and shrink path, which replays the same program
 * and schedule for as long as the generators below are unchanged; a failure
 * worth keeping goes into `programs` in the shape fast-check printed.
 */
import { describe, it } from 'node:test';
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { runs } from '../../helpers/long.js';
import { runConcurrent, RECORD_FRAME, type Call, type ConcurrentProgram, type Wave } from './concurrent-model.js';

const RUNS = runs(300, 1000, 'FERRY_CONCURRENCY_RUNS');

interface Corpus {
  /** Programs that once failed, each replayed under many schedules. */
  programs: Array<{ name: string; program: ConcurrentProgram }>;
  /** fast-check seeds (with a shrink path, one schedule; it replays only against the generators it was found with). */
  seeds: Array<{ seed: number; path?: string; runs?: number; why: string }>;
}
const corpus = JSON.parse(readFileSync(new URL('./concurrent-corpus.json', import.meta.url), 'utf8')) as Corpus;

const r = fc.nat(3);
const call: fc.Arbitrary<Call> = fc.oneof(
  { weight: 5, arbitrary: fc.constant({ op: 'add' as const }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('addBatch' as const), n: fc.integer({ min: 1, max: 12 }) }) },
  { weight: 2, arbitrary: fc.constant({ op: 'addWait' as const }) },
  {
    weight: 10,
    arbitrary: fc.record({
      op: fc.constantFrom(
        'reserve' as const,
        'tryReserve' as const,
        'tryReserve' as const,
        'take' as const,
        'tryTake' as const,
        'tryTake' as const,
        'skip' as const,
        'requeue' as const,
        'tryPeek' as const,
        'commit' as const,
      ),
      r,
    }),
  },
  { weight: 5, arbitrary: fc.record({ op: fc.constant('ack' as const), pick: fc.nat(20) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('ackBatch' as const), picks: fc.array(fc.nat(20), { minLength: 1, maxLength: 4 }) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constantFrom('takeBatch' as const, 'reserveBatch' as const), r, n: fc.integer({ min: 1, max: 8 }) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constantFrom('drain' as const, 'follow' as const), r, n: fc.integer({ min: 1, max: 6 }) }) },
  { weight: 2, arbitrary: fc.constantFrom({ op: 'rewind' as const }, { op: 'sync' as const }, { op: 'stats' as const }) },
  { weight: 1, arbitrary: fc.constant({ op: 'close' as const }) },
);
const wave: fc.Arbitrary<Wave> = fc.record({
  calls: fc.array(call, { minLength: 1, maxLength: 10 }),
  reopen: fc.integer({ min: 0, max: 6 }).map((n) => n === 0),
});
const program: fc.Arbitrary<ConcurrentProgram> = fc.record({
  policy: fc.constantFrom('perOp' as const, 'every3' as const, 'noSync' as const),
  maxBytes: fc.constantFrom(0, 0, 12 * RECORD_FRAME, 40 * RECORD_FRAME),
  readers: fc.integer({ min: 1, max: 4 }),
  waves: fc.array(wave, { minLength: 1, maxLength: 6 }),
});

const property = fc.asyncProperty(program, fc.scheduler(), async (p, s) => {
  await runConcurrent(p, s);
});

describe('DiskQueue under controlled interleavings', () => {
  for (const c of corpus.programs) {
    it(`corpus program: ${c.name}`, async () => {
      await fc.assert(
        fc.asyncProperty(fc.scheduler(), (s) => runConcurrent(c.program, s)),
        { numRuns: 200 },
      );
    });
  }

  for (const c of corpus.seeds) {
    it(`corpus seed ${c.seed}${c.path ? ` path ${c.path}` : ''}: ${c.why}`, async () => {
      await fc.assert(property, c.path ? { seed: c.seed, path: c.path, endOnFailure: true } : { seed: c.seed, numRuns: c.runs ?? 1 });
    });
  }

  it(`${RUNS} random concurrent programs`, { timeout: 900_000 }, async () => {
    await fc.assert(property, { numRuns: RUNS });
  });
});
