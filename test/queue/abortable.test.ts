/**
 * raceSignal, which every guarded store call goes through: one 'abort'
 * listener per signal serves every call racing it. fast-check's scheduler
 * decides the order in which the calls' own promises settle and the signal
 * aborts; each call must settle like its promise when that came first, and
 * reject with a ClosedError otherwise, exactly once, and the signal never
 * carries more than one listener.
 */
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ClosedError } from '../../src/errors.js';
import { raceSignal, stopController } from '../../src/queue/abortable.js';

const RUNS = Number(process.env.FERRY_FUZZ_RUNS ?? 60);

type Outcome = { kind: 'value'; value: number } | { kind: 'error'; error: unknown };

describe('raceSignal', () => {
  it('settles each call like its promise when that comes first, else with one ClosedError; one listener per signal', async () => {
    await fc.assert(
      fc.asyncProperty(fc.scheduler(), fc.array(fc.boolean(), { minLength: 1, maxLength: 12 }), async (s, fails) => {
        const ctl = stopController();
        const settledFirst = new Set<number>();
        let aborted = false;
        const outcomes = new Map<number, Outcome[]>();
        const calls = fails.map((fail, i) => {
          // Each call's own promise settles when the scheduler says, and
          // records whether that was before the abort.
          const own = s.schedule(Promise.resolve(i), `call ${i}`).then((v) => {
            if (!aborted) settledFirst.add(i);
            if (fail) throw new Error(`store error ${v}`);
            return v;
          });
          return raceSignal(ctl.signal, own).then(
            (value) => void outcomes.set(i, [...(outcomes.get(i) ?? []), { kind: 'value', value }]),
            (error) => void outcomes.set(i, [...(outcomes.get(i) ?? []), { kind: 'error', error }]),
          );
        });
        assert.ok(getEventListeners(ctl.signal, 'abort').length <= 1);
        const abort = s.schedule(Promise.resolve(), 'abort').then(() => {
          aborted = true;
          ctl.abort(new ClosedError('closed by the test'));
        });
        await s.waitFor(Promise.all([...calls, abort]));
        // A call made after the abort rejects at once.
        await assert.rejects(raceSignal(ctl.signal, Promise.resolve(1)), ClosedError);
        for (const [i, fail] of fails.entries()) {
          const got = outcomes.get(i) ?? [];
          assert.equal(got.length, 1, `call ${i} settled once`);
          const o = got[0]!;
          if (settledFirst.has(i) && !fail) assert.deepEqual(o, { kind: 'value', value: i });
          else if (settledFirst.has(i)) assert.ok(o.kind === 'error' && (o.error as Error).message === `store error ${i}`);
          else assert.ok(o.kind === 'error' && o.error instanceof ClosedError, `call ${i} cut short by the abort`);
        }
        assert.ok(getEventListeners(ctl.signal, 'abort').length <= 1);
      }),
      { numRuns: RUNS },
    );
  });

  it('keeps one listener on a signal however many calls race it, before and after they settle', async () => {
    const ctl = stopController();
    const pending: Array<() => void> = [];
    const calls = Array.from({ length: 50 }, (_, i) => raceSignal(ctl.signal, new Promise<number>((resolve) => pending.push(() => resolve(i)))));
    assert.equal(getEventListeners(ctl.signal, 'abort').length, 1);
    for (const go of pending.splice(0, 25)) go();
    assert.deepEqual(await Promise.all(calls.slice(0, 25)), Array.from({ length: 25 }, (_, i) => i));
    assert.equal(getEventListeners(ctl.signal, 'abort').length, 1);
    ctl.abort(new ClosedError('closed by the test'));
    const rest = await Promise.allSettled(calls.slice(25));
    assert.ok(rest.every((r) => r.status === 'rejected' && r.reason instanceof ClosedError));
    // The late answers of the calls cut short change nothing.
    for (const go of pending) go();
    assert.equal(getEventListeners(ctl.signal, 'abort').length, 0);
  });
});
