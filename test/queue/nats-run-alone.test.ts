/**
 * The gate a nats subscription's handlers pass (run-alone.ts): handlers run
 * side by side, a recovered delivery runs alone, turns are given first come
 * first served, and a waiter whose lease is lost leaves without a turn.
 * fast-check's scheduler decides when each handler ends and when waiters
 * abort; the model checks every admission.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { RunAlone } from '../../src/queue/brokers/nats/run-alone.js';

describe('nats run-alone gate', () => {
  it('side by side until one must run alone; it waits for the running and holds back the later', async () => {
    const gate = new RunAlone();
    const a = (await gate.enter(false))!;
    const b = (await gate.enter(false))!;
    assert.equal(gate.running, 2);
    const order: string[] = [];
    const alone = gate.enter(true).then((leave) => (order.push('alone'), leave!));
    const later = gate.enter(false).then((leave) => (order.push('later'), leave!));
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(order, [], 'nothing is admitted while a and b run');
    a();
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(order, []);
    b();
    const leaveAlone = await alone;
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(order, ['alone'], 'the later one waits behind the one running alone');
    assert.equal(gate.running, 1);
    leaveAlone();
    leaveAlone(); // a second call changes nothing
    (await later)();
    assert.deepEqual(order, ['alone', 'later']);
    assert.equal(gate.running, 0);
  });

  it('an aborted waiter leaves without a turn and lets the ones behind it in', async () => {
    const gate = new RunAlone();
    const running = (await gate.enter(false))!;
    const ac = new AbortController();
    const alone = gate.enter(true, ac.signal);
    const side = gate.enter(false);
    ac.abort();
    assert.equal(await alone, undefined);
    const leave = await side;
    assert.ok(leave, 'the waiter behind the aborted one runs beside the running one');
    assert.equal(gate.running, 2);
    running();
    leave!();
    assert.equal(await gate.enter(true, AbortSignal.abort()), undefined, 'an already aborted signal gets no turn');
    assert.equal(gate.running, 0);
  });

  it('under any order of endings and aborts: alone means alone, turns are first come first served, nobody waits for ever', async () => {
    await fc.assert(
      fc.asyncProperty(fc.scheduler(), fc.array(fc.record({ alone: fc.boolean(), abort: fc.boolean() }), { minLength: 1, maxLength: 12 }), async (s, entrants) => {
        const gate = new RunAlone();
        let side = 0;
        let alone = 0;
        const admitted: number[] = [];
        const aborted = new Set<number>();
        const runs = entrants.map(async (e, i) => {
          const ac = new AbortController();
          if (e.abort) void s.schedule(Promise.resolve(`abort ${i}`)).then(() => ac.abort());
          const leave = await gate.enter(e.alone, ac.signal);
          if (leave === undefined) {
            aborted.add(i);
            return;
          }
          admitted.push(i);
          if (e.alone) {
            assert.equal(side + alone, 0, `${i} runs alone`);
            alone++;
          } else {
            assert.equal(alone, 0, `${i} runs beside no lone handler`);
            side++;
          }
          await s.schedule(Promise.resolve(`end ${i}`));
          if (e.alone) alone--;
          else side--;
          leave();
        });
        await s.waitFor(Promise.all(runs));
        assert.equal(admitted.length + aborted.size, entrants.length, 'every entrant was admitted or aborted');
        for (const i of aborted) assert.ok(entrants[i]!.abort, `${i} was refused only after its abort`);
        assert.deepEqual(admitted, [...admitted].sort((x, y) => x - y), 'admitted in arrival order');
        assert.equal(gate.running, 0);
      }),
      { numRuns: 300 },
    );
  });
});
