/**
 * forward's intake counts a group of lines only once its sync and every
 * older one resolved (src/cli/ordered-syncs.ts). fast-check's scheduler
 * decides the order in which the pipelined syncs settle, and which of them
 * fail; the program starts and waits for them as the intake does. The count
 * must always be a prefix of the input: the groups before the first failed
 * sync, whatever later syncs did.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { OrderedSyncs } from '../../src/cli/ordered-syncs.js';
import { runs } from '../helpers/long.js';

const RUNS = runs(300, 3000);

/** One step of the intake: a group of lines appended and its sync started, then a throttle. */
type Step = { lines: number; ahead: boolean };

describe('OrderedSyncs', () => {
  it('counts a prefix of the groups, in order, whatever order the syncs settle in', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.scheduler(),
        fc.array(fc.record({ lines: fc.integer({ min: 0, max: 5 }), ahead: fc.boolean() }), { minLength: 1, maxLength: 12 }),
        fc.array(fc.boolean(), { maxLength: 12 }),
        fc.integer({ min: 0, max: 4 }),
        async (s, steps: Step[], failing, ahead) => {
          /** Per sync started: whether it failed, and whether it settled. */
          const syncs: Array<{ fails: boolean; settled: boolean }> = [];
          /** Per group (a start with lines), the index of its sync. */
          const groupSync: number[] = [];
          const counted: number[] = [];
          const violations: string[] = [];
          const sync = () => {
            const i = syncs.length;
            const entry = { fails: failing[i] ?? false, settled: false };
            syncs.push(entry);
            const outcome = entry.fails ? Promise.reject(new Error(`sync ${i} failed`)) : Promise.resolve();
            return s.schedule(outcome, `sync ${i} ${entry.fails ? 'fails' : 'lands'}`).finally(() => void (entry.settled = true));
          };
          const pipeline = new OrderedSyncs(sync, (n) => {
            const g = counted.length;
            // Its own sync and every older one have resolved, none failed.
            for (let k = 0; k <= groupSync[g]!; k++) {
              if (!syncs[k]!.settled || syncs[k]!.fails) violations.push(`group ${g} counted while sync ${k} ${syncs[k]!.fails ? 'failed' : 'was running'}`);
            }
            counted.push(n);
          }, ahead);
          // The intake: start each group's sync, throttle now and then, drain at the end; settle on the first failure.
          const intake = async () => {
            try {
              for (const step of steps) {
                if (step.lines > 0) groupSync.push(syncs.length);
                pipeline.start(step.lines);
                if (step.ahead) await pipeline.throttle();
              }
              await pipeline.drain();
              return 'drained';
            } catch (err) {
              await pipeline.settle();
              return (err as Error).message;
            }
          };
          const outcome = await s.waitFor(intake());
          const groups = steps.filter((x) => x.lines > 0).map((x) => x.lines);
          const firstFailure = syncs.findIndex((x) => x.fails);
          const landed = firstFailure < 0 ? groups.length : groupSync.findIndex((k) => k >= firstFailure);
          const prefix = landed < 0 ? groups : groups.slice(0, landed);
          assert.deepEqual(violations, []);
          assert.deepEqual(counted, prefix, 'the groups before the first failed sync, in order');
          assert.equal(outcome, firstFailure < 0 ? 'drained' : `sync ${firstFailure} failed`, 'the intake ends with the first failure');
          assert.ok(syncs.every((x) => x.settled), 'no sync left running');
        },
      ),
      { numRuns: RUNS, includeErrorInReport: true, ...(process.env.FC_SEED ? { seed: Number(process.env.FC_SEED), path: process.env.FC_PATH, endOnFailure: true } : {}) },
    );
  });

  it('start(0) starts no sync; drain with nothing started resolves', async () => {
    let syncs = 0;
    const pipeline = new OrderedSyncs(async () => void syncs++, () => assert.fail('nothing to count'), 1);
    pipeline.start(0);
    await pipeline.drain();
    await pipeline.settle();
    assert.equal(syncs, 0);
  });
});
