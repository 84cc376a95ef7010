/**
 * Controlled interleavings: fast-check's scheduler decides the order in which
 * calls are made and in which the spool's fdatasyncs complete (or fail), and
 * the spool must agree with the reference model in model.ts after every step.
 * `FERRY_SPOOL_RUNS` sets the number of programs (default 1000).
 */
import { it } from 'node:test';
import fc from 'fast-check';
import { runScheduled, type Cmd, type Program } from './model.js';

const RUNS = Number(process.env.FERRY_SPOOL_RUNS ?? 1000);

const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 4, arbitrary: fc.constant({ op: 'append' as const }) },
  { weight: 4, arbitrary: fc.constant({ op: 'appendNoSync' as const }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('appendRun' as const), n: fc.integer({ min: 1, max: 3 }) }) },
  { weight: 2, arbitrary: fc.constant({ op: 'sync' as const }) },
  { weight: 4, arbitrary: fc.constant({ op: 'pop' as const }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('popBatch' as const), n: fc.integer({ min: 1, max: 4 }) }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('commit' as const), k: fc.nat(3) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('popRun' as const), n: fc.integer({ min: 1, max: 4 }), after: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('commitRun' as const), k: fc.nat(3) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('requeue' as const), k: fc.nat(3) }) },
  { weight: 1, arbitrary: fc.constant({ op: 'fail' as const }) },
  { weight: 1, arbitrary: fc.constant({ op: 'close' as const }) },
);
const program: fc.Arbitrary<Program> = fc.record({ commitSync: fc.boolean(), cmds: fc.array(cmd, { minLength: 1, maxLength: 16 }) });

it(`spool against its model under ${RUNS} scheduled interleavings`, { timeout: 600_000 }, async () => {
  await fc.assert(
    fc.asyncProperty(fc.scheduler(), program, async (s, p) => {
      await runScheduled(s, p);
    }),
    { numRuns: RUNS, includeErrorInReport: true },
  );
});
