/**
 * Runs one concurrent program (as fast-check printed it) under 200 schedules
 * and prints the first broken rule: the way to look at a counterexample from
 * concurrent.test.ts before adding its seed to concurrent-corpus.json.
 *
 *   node --import tsx test/diskqueue/fuzz/replay-concurrent.ts '{"policy":"perOp","maxBytes":0,"readers":2,"waves":[...]}'
 */
import fc from 'fast-check';
import { runConcurrent, type ConcurrentProgram } from './concurrent-model.js';

const program = JSON.parse(process.argv[2] ?? '') as ConcurrentProgram;
try {
  await fc.assert(
    fc.asyncProperty(fc.constant(program), fc.scheduler(), (p, s) => runConcurrent(p, s)),
    { numRuns: 200 },
  );
  console.log('every rule held under 200 schedules');
} catch (err) {
  console.log((err as { cause?: unknown }).cause ?? err);
  process.exitCode = 1;
}
