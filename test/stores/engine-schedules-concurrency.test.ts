/**
 * Schedule calls run at once (`Promise.all`), on one queue and on two
 * instances, on every store that keeps schedules: each pair leaves what one
 * of its sequential orders would have left, and calls on one queue keep
 * their call order. Also: close during a schedule call, close while the
 * scheduler's store call hangs, and subscribe beside schedule.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { StoreQueue } from '../../src/queue/engine.js';
import { MemoryStore } from '../../src/queue/stores/memory.js';
import type { ScheduleOptions } from '../../src/queue/schedules/types.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { orHang } from './helpers.js';
import { scheduleHarness } from './schedule-harness.js';
import { SCHEDULE_FACTORIES } from './schedule-stores.js';

const T0 = Date.parse('2026-01-05T00:00:00.000Z');
const A: ScheduleOptions = { everyMs: 1000, topic: 'ta' };
const B: ScheduleOptions = { everyMs: 2000, topic: 'tb' };
const topics = async (q: StoreQueue) => (await q.listSchedules()).map((s) => `${s.name}:${s.topic}`);

for (const { factory, skip } of SCHEDULE_FACTORIES) {
  describe(`engine schedules at once: ${factory.name}`, { skip }, () => {
    const t = scheduleHarness(factory);

    it('schedule ∥ schedule, one name: one queue keeps call order; two instances store one of the two whole', async () => {
      const clock = new FakeClock(T0);
      const q = await t.instance(clock);
      const other = await t.instance(clock);
      assert.deepEqual(await Promise.all([q.schedule('s', A), q.schedule('s', A)]), [true, false], 'same options: the second finds the first');
      assert.deepEqual(await Promise.all([q.schedule('s', B), q.schedule('s', A)]), [true, true]);
      assert.deepEqual(await topics(q), ['s:ta'], 'the later call wins');

      const same = await Promise.all([q.schedule('u', B), other.schedule('u', B)]);
      assert.deepEqual(same.sort(), [false, true]);
      assert.deepEqual(await Promise.all([q.schedule('v', A), other.schedule('v', B)]), [true, true]);
      assert.ok(['v:ta', 'v:tb'].includes((await topics(q)).find((s) => s.startsWith('v:'))!));
      const [v] = (await q.listSchedules()).filter((s) => s.name === 'v');
      assert.equal(v!.everyMs, v!.topic === 'ta' ? 1000 : 2000, 'not a mix of the two');
    });

    it('schedule ∥ schedule, different names: both stored', async () => {
      const clock = new FakeClock(T0);
      const q = await t.instance(clock);
      const other = await t.instance(clock);
      assert.deepEqual(await Promise.all([q.schedule('a', A), q.schedule('b', B), other.schedule('c', A)]), [true, true, true]);
      assert.deepEqual(await topics(other), ['a:ta', 'b:tb', 'c:ta']);
    });

    it('schedule ∥ unschedule: one queue keeps call order; across instances the outcome matches an order', async () => {
      const clock = new FakeClock(T0);
      const q = await t.instance(clock);
      const other = await t.instance(clock);
      assert.deepEqual(await Promise.all([q.schedule('s', A), q.unschedule('s')]), [true, true]);
      assert.deepEqual(await q.listSchedules(), []);
      assert.deepEqual(await Promise.all([q.unschedule('s'), q.schedule('s', A)]), [false, true]);
      assert.deepEqual(await topics(q), ['s:ta']);

      for (let i = 0; i < 5; i++) {
        await q.unschedule('x');
        const [, existed] = await Promise.all([q.schedule('x', B), other.unschedule('x')]);
        const left = (await topics(q)).includes('x:tb');
        assert.equal(left, !existed, existed ? 'unscheduled after it was stored' : 'unscheduled before it was stored');
      }
    });

    it('listSchedules ∥ schedule: the list is from before or after, and the schedule is there afterwards', async () => {
      const clock = new FakeClock(T0);
      const q = await t.instance(clock);
      const other = await t.instance(clock);
      const [seen, , seenElsewhere] = await Promise.all([q.listSchedules(), q.schedule('s', A), other.listSchedules()]);
      for (const l of [seen, seenElsewhere]) assert.ok(l.length === 0 || (l.length === 1 && l[0]!.name === 's'));
      assert.deepEqual(await topics(other), ['s:ta']);
    });

    it('schedule ∥ close: a schedule called before close is stored; close resolves; calls after it reject', async () => {
      const clock = new FakeClock(T0);
      const q = await t.instance(clock);
      const other = await t.instance(clock, { fireSchedules: false });
      const [stored] = await Promise.all([q.schedule('s', A), q.unschedule('never'), q.close()]);
      assert.equal(stored, true);
      assert.deepEqual(await topics(other), ['s:ta']);
      await assert.rejects(q.schedule('t', A), { name: 'ClosedError' });
      assert.equal(clock.pending, 0, 'the closed queue left no scheduler timer');
    });

    it('subscribe ∥ schedule: both settle and the subscription gets the ticks', async () => {
      const clock = new FakeClock(T0);
      const q = await t.instance(clock);
      const got: string[] = [];
      await Promise.all([q.subscribe('ta', 'g', async (d) => void got.push(d.id), { pollIntervalMs: 20 }), q.schedule('s', A)]);
      await t.settle(clock);
      await t.step(clock, T0 + 1000);
      await t.step(clock, T0 + 2000);
      const start = Date.now();
      while (got.length < 2 && Date.now() - start < 120_000) await new Promise((r) => setTimeout(r, 10));
      assert.equal(got.length, 2);
    });
  });
}

describe('engine schedules: close keeps its deadline while the scheduler waits on the store', () => {
  it('a listSchedules that never answers does not hold close past timeoutMs', async () => {
    const store = new MemoryStore();
    let calls = 0;
    store.listSchedules = () => (calls++, new Promise(() => undefined));
    const errors: string[] = [];
    const q = new StoreQueue(store, { onError: (_err, op) => errors.push(op) }, { clock: new FakeClock(T0) });
    assert.equal(calls, 1, 'the first round asked at once');
    await orHang(q.close({ timeoutMs: 50 }), 'close with a hung listSchedules');
    assert.deepEqual(errors, [], 'a round cut short by close is not reported');
  });
});
