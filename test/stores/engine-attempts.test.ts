/**
 * One attempt of a delivery at a time, on every store: a lease that could not
 * be renewed (a database blip, an event loop blocked past the lease) gives the
 * running attempt up at its deadline, and the redelivery claimed meanwhile
 * waits for the old handler to return. A handler that always succeeds is never
 * dead-lettered for lost leases it caused itself.
 */
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import type { LeaseLostEvent } from '../../src/queue/events.js';
import { enc, engineHarness } from './engine-harness.js';
import { QUEUE_FACTORIES, conformanceIt } from './factories.js';
import { counts, sleep, waitFor } from './helpers.js';

/** Counts handler runs per message and the most that ever overlapped. */
function overlapMeter() {
  const running = new Map<string, number>();
  let maxOverlap = 0;
  const runs: string[] = [];
  return {
    enter(id: string, attempt: number) {
      const n = (running.get(id) ?? 0) + 1;
      running.set(id, n);
      maxOverlap = Math.max(maxOverlap, n);
      runs.push(`${id}#${attempt}`);
    },
    leave(id: string) {
      running.set(id, running.get(id)! - 1);
    },
    get maxOverlap() {
      return maxOverlap;
    },
    runs,
  };
}

for (const factory of QUEUE_FACTORIES) {
  describe(`engine attempts: ${factory.name}`, { skip: factory.skip }, () => {
    const it = conformanceIt(factory, 'attempts');
    const t = engineHarness(factory);

    it('renewals failing for a short blip: the message completes once, the handler never runs twice at once, nothing dies', async () => {
      const { q, store } = await t.instance();
      let blip = true;
      store.before.extend = () => {
        if (blip) throw new Error('database blip');
      };
      const meter = overlapMeter();
      const completed: string[] = [];
      const dead: string[] = [];
      const lost: LeaseLostEvent[] = [];
      q.on('completed', (e) => completed.push(e.messageId));
      q.on('deadLettered', (e) => dead.push(e.messageId));
      q.on('leaseLost', (e) => lost.push(e));
      await q.subscribe('t', 'g', async (d) => {
        meter.enter(d.id, d.attempt);
        try {
          await sleep(t.ms(1000)); // ignores its signal, and always succeeds
        } finally {
          meter.leave(d.id);
        }
      }, { leaseDurationMs: t.ms(400), pollIntervalMs: 20, maxAttempts: 5, backoffBaseMs: 5, backoffMaxMs: 20 });
      await q.publish({ id: 'm', topic: 't', payload: enc('x') });
      // The blip lasts until the first attempt has lost its lease.
      await waitFor(() => lost.length >= 1, 20_000, 'the first lease to lapse');
      blip = false;
      await waitFor(() => completed.length === 1, 30_000, 'the completion');
      await waitFor(async () => counts(await q.stats('t', 'g')).leased === 0, 20_000, 'no lease left');
      await sleep(200);
      assert.equal(meter.maxOverlap, 1, `never two runs at once: ${meter.runs.join(', ')}`);
      assert.ok(meter.runs.length <= 2, `at most two runs: ${meter.runs.join(', ')}`);
      assert.deepEqual(completed, ['m']);
      assert.deepEqual(dead, []);
      // Which path notices first is a race the engine may lose either way: the
      // lapse timer, or the poll loop's claim taking the expired lease back
      // (the new claim then supersedes the old attempt). Both abort attempt 1.
      assert.ok(['lapse', 'claim'].includes(lost[0]!.op), `attempt 1 lost by a lapse or a superseding claim, not ${lost[0]!.op}`);
      assert.equal(lost[0]!.attempt, 1);
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
    });

    it('renewals failing for good: each lapse aborts the handler, which then runs again once, never overlapping, until the attempts run out', async () => {
      const { q, store } = await t.instance();
      store.before.extend = () => {
        throw new Error('database down for renewals');
      };
      const meter = overlapMeter();
      const order: string[] = [];
      const dead: Array<{ reason: string; attempt: number }> = [];
      // A lapse and the loop's own re-claim of the expired lease race to notice
      // first; either one gives the attempt up, so both read as a lapse here.
      q.on('leaseLost', (e) => order.push(`lost ${e.attempt} ${e.op === 'claim' ? 'lapse' : e.op}`));
      q.on('deadLettered', (e) => dead.push({ reason: e.reason, attempt: e.attempt }));
      await q.subscribe('t', 'g', async (d, signal) => {
        meter.enter(d.id, d.attempt);
        order.push(`start ${d.attempt}`);
        try {
          await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
          order.push(`aborted ${d.attempt}`);
        } finally {
          meter.leave(d.id);
        }
      }, { leaseDurationMs: t.ms(150), pollIntervalMs: 20, maxAttempts: 3 });
      await q.publish({ id: 'm', topic: 't', payload: enc('x') });
      await waitFor(() => dead.length === 1, 30_000, 'the dead letter');
      assert.equal(meter.maxOverlap, 1);
      // A slow store may also see the fourth claim (taken only to be
      // dead-lettered) lapse while its kill is written: that event is not a run.
      assert.deepEqual(order.filter((e) => !e.startsWith('lost 4 ')), [
        'start 1', 'lost 1 lapse', 'aborted 1',
        'start 2', 'lost 2 lapse', 'aborted 2',
        'start 3', 'lost 3 lapse', 'aborted 3',
      ]);
      assert.deepEqual(dead, [{ reason: 'leases', attempt: 3 }]);
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 0, leased: 0, dead: 1 });
    });

    it('a handler that blocks the event loop past its lease: two instances, one completion, no run overlaps, nothing left leased', async () => {
      // Two instances (as two processes would be): each never runs the delivery twice at once.
      const a = await t.instance();
      const b = await t.instance();
      const meters = [overlapMeter(), overlapMeter()];
      const completed: string[] = [];
      for (const x of [a, b]) x.q.on('completed', (e) => completed.push(e.messageId));
      const handlerOf = (meter: ReturnType<typeof overlapMeter>) => async (d: { id: string; attempt: number }) => {
        meter.enter(d.id, d.attempt);
        try {
          if (d.attempt === 1) {
            const end = Date.now() + 2500;
            while (Date.now() < end) { /* no heartbeat can run */ }
          }
          await sleep(10);
        } finally {
          meter.leave(d.id);
        }
      };
      const opts = { leaseDurationMs: 1000, pollIntervalMs: 20 };
      await a.q.subscribe('t', 'g', handlerOf(meters[0]!), opts);
      await b.q.subscribe('t', 'g', handlerOf(meters[1]!), opts);
      await a.q.publish({ id: 'm', topic: 't', payload: enc('x') });
      await waitFor(() => completed.length >= 1, 30_000, 'a completion');
      await waitFor(async () => counts(await a.q.stats('t', 'g')).leased === 0, 20_000, 'no lease left');
      await sleep(300);
      for (const meter of meters) assert.equal(meter.maxOverlap <= 1, true, `never two runs at once in one instance: ${meter.runs.join(', ')}`);
      assert.deepEqual(completed, ['m']);
      assert.deepEqual(counts(await a.q.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
    });

    it('two subscriptions of one queue on one group never run one delivery at once after a lapse', async () => {
      const { q, store } = await t.instance();
      let failing = true;
      store.before.extend = () => {
        if (failing) throw new Error('renewals down');
      };
      const meter = overlapMeter();
      const lost: string[] = [];
      q.on('leaseLost', (e) => lost.push(`${e.attempt} ${e.op}`));
      const completed: string[] = [];
      q.on('completed', (e) => completed.push(e.messageId));
      const handler = async (d: { id: string; attempt: number }) => {
        meter.enter(d.id, d.attempt);
        try {
          await sleep(d.attempt === 1 ? t.ms(600) : 10); // the first run ignores its signal and outlives its lease
        } finally {
          meter.leave(d.id);
        }
      };
      const opts = { leaseDurationMs: t.ms(200), pollIntervalMs: 10 };
      await q.subscribe('t', 'g', handler, opts);
      await q.subscribe('t', 'g', handler, opts);
      await q.publish({ id: 'm', topic: 't', payload: enc('x') });
      await waitFor(() => lost.length >= 1, 20_000, 'a lapse');
      failing = false;
      await waitFor(() => completed.length === 1, 30_000, 'the completion');
      assert.equal(meter.maxOverlap, 1, `never two runs at once: ${meter.runs.join(', ')}`);
      assert.deepEqual(completed, ['m']);
    });
  });
}
