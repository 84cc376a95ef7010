/**
 * Engine-level conformance of schedules on every store that keeps them:
 * `everyMs` and cron ticks, each tick published once however many
 * instances fire it, the catch-up rules after a time no instance ran,
 * unschedule, scheduling again, and a daily schedule across both
 * daylight-saving changes of a year. The schedulers run on a fake clock
 * (schedule-harness.ts), so a test walks through minutes or days of ticks
 * without waiting for them, and every assertion is on the stored messages.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { scheduleTickId, HEADER_SCHEDULE, HEADER_SCHEDULE_TICK } from '../../src/queue/schedules/tick-message.js';
import type { CatchUp } from '../../src/queue/schedules/types.js';
import { FakeClock } from '../helpers/fake-clock.js';
import { enc } from './engine-harness.js';
import { scheduleHarness } from './schedule-harness.js';
import { SCHEDULE_FACTORIES } from './schedule-stores.js';

const SEC = 1000;
const MIN = 60 * SEC;
const T0 = Date.parse('2026-01-05T00:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();
/** The loop looks again only every two days, so each step of the clock to its next timer is one tick. */
const DAYS_REFRESH = { refreshMs: 2 * 86_400_000, stallMs: 60_000 };
/** ISO instants of T0 + each of `mins` minutes. */
const minutes = (...mins: number[]) => mins.map((m) => iso(T0 + m * MIN));

for (const { factory, skip } of SCHEDULE_FACTORIES) {
  describe(`engine schedules: ${factory.name}`, { skip }, () => {
    const t = scheduleHarness(factory);

    it('everyMs publishes every tick once, at the multiples of its period, with the schedule headers and an ID derived from name and tick', async () => {
      const clock = new FakeClock(T0 + 500);
      const q = await t.instance(clock);
      assert.equal(await q.schedule('beat', { everyMs: SEC, topic: 't', payload: enc('p'), key: 'k', headers: { a: 'b' } }), true);
      await t.settle(clock);
      for (let at = T0 + 1000; at <= T0 + 3500; at += 500) await t.step(clock, at);
      const msgs = await t.messages(q, 't');
      assert.deepEqual(msgs.map((m) => m.headers![HEADER_SCHEDULE_TICK]), [iso(T0 + 1000), iso(T0 + 2000), iso(T0 + 3000)]);
      for (const m of msgs) {
        const tick = new Date(m.headers![HEADER_SCHEDULE_TICK]!);
        assert.equal(m.id, scheduleTickId('beat', tick));
        assert.deepEqual(m.headers, { a: 'b', [HEADER_SCHEDULE]: 'beat', [HEADER_SCHEDULE_TICK]: tick.toISOString() });
        assert.equal(m.key, 'k');
        assert.deepEqual(Uint8Array.from(m.payload), enc('p'));
      }
      const [info] = await q.listSchedules();
      assert.deepEqual([info!.lastTickAt, info!.nextTickAt], [new Date(T0 + 3000), new Date(T0 + 4000)]);
      assert.deepEqual(t.errors, []);
    });

    it('a cron schedule ticks at the wall times of its time zone, the loop sleeping until each', async () => {
      const clock = new FakeClock(Date.parse('2026-01-09T00:00:00Z')); // a Friday
      const q = await t.instance(clock, {}, DAYS_REFRESH);
      await q.schedule('standup', { cron: '0 9 * * MON-FRI', timezone: 'America/New_York', topic: 't' });
      await t.settle(clock);
      const end = Date.parse('2026-01-17T00:00:00Z');
      while (clock.nextAt! <= end) await t.step(clock, clock.nextAt!);
      assert.deepEqual(await t.ticks(q, 't'), ['09', '12', '13', '14', '15', '16'].map((d) => `2026-01-${d}T14:00:00.000Z`));
    });

    it('a daily 02:30 in Europe/Berlin across both daylight-saving changes of 2026: once a day, 03:00 on the spring day, the first 02:30 on the autumn day', async () => {
      const want: string[] = [];
      for (const [from, to, ticks] of [
        ['2026-03-27T12:00:00Z', '2026-03-31T12:00:00Z', ['2026-03-28T01:30:00.000Z', '2026-03-29T01:00:00.000Z', '2026-03-30T00:30:00.000Z', '2026-03-31T00:30:00.000Z']],
        ['2026-10-23T12:00:00Z', '2026-10-27T12:00:00Z', ['2026-10-24T00:30:00.000Z', '2026-10-25T00:30:00.000Z', '2026-10-26T01:30:00.000Z', '2026-10-27T01:30:00.000Z']],
      ] as const) {
        const clock = new FakeClock(Date.parse(from));
        const q = await t.instance(clock, {}, DAYS_REFRESH);
        await q.schedule('nightly', { cron: '30 2 * * *', timezone: 'Europe/Berlin', topic: 't' });
        await t.settle(clock, 1);
        while (clock.nextAt! <= Date.parse(to)) await t.step(clock, clock.nextAt!, 1);
        await q.unschedule('nightly');
        await q.close();
        want.push(...ticks);
        const other = await t.instance(new FakeClock(Date.parse(to)), { fireSchedules: false });
        assert.deepEqual(await t.ticks(other, 't'), want);
      }
    });

    it('instances firing the same ticks store each once', async () => {
      const clock = new FakeClock(T0);
      const qs = [await t.instance(clock), await t.instance(clock), await t.instance(clock)];
      await qs[1]!.schedule('s', { everyMs: SEC, topic: 't' });
      await t.settle(clock);
      for (let at = T0 + 250; at <= T0 + 10_000; at += 250) await t.step(clock, at);
      const want = Array.from({ length: 10 }, (_, i) => iso(T0 + (i + 1) * SEC));
      for (const q of qs) assert.deepEqual(await t.ticks(q, 't'), want);
    });

    it('ticks late while the queue runs are all published, whatever catchUp says: a slow round is not an outage', async () => {
      const clock = new FakeClock(T0);
      const q = await t.instance(clock);
      await q.schedule('s', { everyMs: SEC, topic: 't', catchUp: 'none' });
      await t.settle(clock);
      await t.step(clock, T0 + 5500); // one wake-up, five ticks due
      assert.deepEqual(await t.ticks(q, 't'), [1, 2, 3, 4, 5].map((s) => iso(T0 + s * SEC)));
    });

    const outage: Array<[CatchUp, number[]]> = [
      ['none', []],
      ['latest', [12]],
      [{ maxTicks: 3 }, [10, 11, 12]],
      [{ withinMs: 4 * MIN }, [9, 10, 11, 12]],
      [{ withinMs: 10 * MIN, maxTicks: 2 }, [11, 12]],
    ];
    for (const [catchUp, caught] of outage) {
      it(`catchUp ${JSON.stringify(catchUp)}: ticks missed while no queue ran are ${caught.length === 0 ? 'dropped' : `published, oldest first: minutes ${caught.join(', ')}`}; the rest follow on time`, async () => {
        const clock = new FakeClock(T0);
        const a = await t.instance(clock);
        await a.schedule('s', { everyMs: MIN, topic: 't', catchUp });
        await t.settle(clock);
        await t.step(clock, T0 + MIN);
        await t.step(clock, T0 + 2 * MIN);
        await a.close();
        // Nothing runs from minute 2 until minute 12.5, when another instance starts.
        clock.set(T0 + 12.5 * MIN);
        const b = await t.instance(clock);
        await t.step(clock, T0 + 13 * MIN);
        await t.step(clock, T0 + 14 * MIN);
        const msgs = await t.messages(b, 't');
        assert.deepEqual(msgs.map((m) => m.headers![HEADER_SCHEDULE_TICK]), minutes(1, 2, ...caught, 13, 14), 'in publish order');
      });
    }

    it('a queue whose rounds stopped for longer than refreshMs + stallMs treats the ticks of that time as missed', async () => {
      const clock = new FakeClock(T0);
      const q = await t.instance(clock, {}, { refreshMs: 10 * SEC, stallMs: 60 * SEC });
      await q.schedule('s', { everyMs: 10 * SEC, topic: 't', catchUp: 'latest' });
      await t.settle(clock);
      await t.step(clock, T0 + 10 * SEC);
      await t.step(clock, T0 + 5 * MIN + 5 * SEC); // the process was suspended: 30 ticks came and went
      await t.step(clock, T0 + 5 * MIN + 10 * SEC);
      assert.deepEqual(await t.ticks(q, 't'), [iso(T0 + 10 * SEC), iso(T0 + 5 * MIN), iso(T0 + 5 * MIN + 10 * SEC)]);
    });

    it('unschedule stops the ticks at once and reports whether the schedule existed', async () => {
      const clock = new FakeClock(T0);
      const q = await t.instance(clock);
      const other = await t.instance(clock);
      await q.schedule('s', { everyMs: SEC, topic: 't' });
      await t.settle(clock);
      await t.step(clock, T0 + 2000);
      assert.equal(await other.unschedule('s'), true);
      assert.equal(await other.unschedule('s'), false);
      await t.settle(clock);
      for (let at = T0 + 2500; at <= T0 + 6000; at += 500) await t.step(clock, at);
      assert.deepEqual(await t.ticks(q, 't'), [iso(T0 + 1000), iso(T0 + 2000)]);
      assert.deepEqual(await q.listSchedules(), []);
    });

    it('scheduling the same options again changes nothing; other options replace the schedule, whose ticks then count from the change', async () => {
      const clock = new FakeClock(T0);
      const q = await t.instance(clock);
      const other = await t.instance(clock);
      assert.equal(await q.schedule('s', { everyMs: MIN, topic: 't', headers: { x: '1', y: '2' } }), true);
      await t.settle(clock);
      await t.step(clock, T0 + MIN);
      // Declared again by another instance, the headers in another order: the same schedule, its progress kept.
      assert.equal(await other.schedule('s', { topic: 't', headers: { y: '2', x: '1' }, everyMs: MIN }), false);
      const [kept] = await q.listSchedules();
      assert.deepEqual([kept!.updatedAt, kept!.lastTickAt], [new Date(T0), new Date(T0 + MIN)]);

      await t.step(clock, T0 + 90 * SEC);
      assert.equal(await other.schedule('s', { everyMs: 30 * SEC, topic: 'u', payload: enc('new') }), true);
      await t.settle(clock);
      for (const s of [120, 150, 180]) await t.step(clock, T0 + s * SEC);
      assert.deepEqual(await t.ticks(q, 't'), [iso(T0 + MIN)], 'the old topic got nothing after the change');
      assert.deepEqual(await t.ticks(q, 'u'), [120, 150, 180].map((s) => iso(T0 + s * SEC)));
      const [info] = await q.listSchedules();
      assert.deepEqual({ ...info, payload: Uint8Array.from(info!.payload) }, {
        name: 's',
        everyMs: 30 * SEC,
        topic: 'u',
        payload: enc('new'),
        catchUp: 'latest',
        updatedAt: new Date(T0 + 90 * SEC),
        lastTickAt: new Date(T0 + 180 * SEC),
        nextTickAt: new Date(T0 + 210 * SEC),
      });
    });

    it('with fireSchedules off a queue manages schedules and publishes no tick', async () => {
      const clock = new FakeClock(T0);
      const q = await t.instance(clock, { fireSchedules: false });
      assert.equal(await q.schedule('s', { everyMs: SEC, topic: 't' }), true);
      clock.set(T0 + 10_000);
      assert.equal(clock.pending, 0, 'no scheduler timer');
      assert.deepEqual(await t.ticks(q, 't'), []);
      assert.equal((await q.listSchedules()).length, 1);
    });

    it('close stops the scheduler: no timer is left and nothing is published after', async () => {
      const clock = new FakeClock(T0);
      const q = await t.instance(clock);
      const other = await t.instance(clock, { fireSchedules: false });
      await q.schedule('s', { everyMs: SEC, topic: 't' });
      await t.settle(clock);
      await t.step(clock, T0 + SEC);
      await q.close();
      assert.equal(clock.pending, 0);
      clock.set(T0 + 10 * SEC);
      assert.deepEqual(await t.ticks(other, 't'), [iso(T0 + SEC)]);
    });
  });
}
