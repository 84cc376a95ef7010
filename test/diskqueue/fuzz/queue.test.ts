/**
 * Property test: random programs of add / reserve / take / commit / ack /
 * rewind / reopen / crash / power cut / byte flip against the reference model
 * in model.ts. `FERRY_FUZZ_RUNS` sets the number of random programs (default
 * 100, which keeps this file to a few seconds; `npm run fuzz` runs 2000).
 * Every entry of corpus.json is replayed on every run: explicit programs
 * (each failure found so far, shrunk, in the form that stays valid when the
 * generators change) and fast-check seeds, each run for its `runs` programs. A
 * seed's shrink `path` only replays against the generators it was found with,
 * so a found failure goes into `programs`; an entry may carry a `path` for as
 * long as the generators are unchanged.
 */
import { describe, it } from 'node:test';
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { runProgram, type Cmd, type Program } from './model.js';

const RUNS = Number(process.env.FERRY_FUZZ_RUNS ?? 100);

interface Corpus {
  programs: Array<{ name: string } & Program>;
  seeds: Array<{ seed: number; runs?: number; path?: string; why: string }>;
}
const corpus = JSON.parse(readFileSync(new URL('./corpus.json', import.meta.url), 'utf8')) as Corpus;

const small = fc.integer({ min: 1, max: 40 });
const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ op: fc.constant('add' as const), n: small }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('batch' as const), n: fc.integer({ min: 1, max: 300 }) }) },
  { weight: 4, arbitrary: fc.record({ op: fc.constant('reserve' as const), n: small }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('take' as const), n: small }) },
  { weight: 3, arbitrary: fc.constant({ op: 'commit' as const }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('ack' as const), i: fc.nat(100) }) },
  { weight: 1, arbitrary: fc.constant({ op: 'rewind' as const }) },
  { weight: 1, arbitrary: fc.constant({ op: 'sync' as const }) },
  { weight: 2, arbitrary: fc.constant({ op: 'reopen' as const }) },
  { weight: 1, arbitrary: fc.constant({ op: 'crash' as const }) },
  {
    weight: 2,
    arbitrary: fc.record({ op: fc.constant('powerCut' as const), tear: fc.constantFrom('none' as const, 'all' as const, 'even' as const, 'odd' as const) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('flip' as const),
      seg: fc.nat(8),
      header: fc.boolean(),
      at: fc.nat(1 << 20),
      mask: fc.integer({ min: 1, max: 255 }),
    }),
  },
);
const program: fc.Arbitrary<Program> = fc.record({
  policy: fc.constantFrom('perOp' as const, 'every4' as const),
  cmds: fc.array(cmd, { maxLength: 30 }),
});

const property = fc.asyncProperty(program, async (p) => {
  await runProgram(p);
});

describe('DiskQueue against its model', () => {
  for (const p of corpus.programs) {
    it(`corpus program: ${p.name}`, async () => {
      await runProgram(p);
    });
  }

  for (const s of corpus.seeds) {
    it(`corpus seed ${s.seed}${s.path ? ` path ${s.path}` : ''}: ${s.why}`, async () => {
      await fc.assert(property, s.path ? { seed: s.seed, path: s.path, endOnFailure: true } : { seed: s.seed, numRuns: s.runs ?? 1 });
    });
  }

  it(`${RUNS} random programs`, { timeout: 600_000 }, async () => {
    await fc.assert(property, { numRuns: RUNS });
  });
});
