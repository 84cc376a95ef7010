/**
 * When schedules tick, and which ticks a round publishes, as pure functions
 * (src/queue/schedules/ticks.ts, plan.ts): epoch-aligned periods, cron in a
 * time zone across both daylight-saving changes of a year, and the
 * catch-up rules. The engine's loop over these is tested with a fake clock
 * in test/stores/engine-schedules.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { caughtUp, planTicks } from '../../src/queue/schedules/plan.js';
import { ticksBetween, ticksOf } from '../../src/queue/schedules/ticks.js';
import type { CatchUp, ScheduleRecord, ScheduleSpec } from '../../src/queue/schedules/types.js';

const iso = (ms: number[]) => ms.map((t) => new Date(t).toISOString());
const at = (s: string) => Date.parse(s);

/** Every tick of `spec` in (from, to], as ISO instants. */
function between(spec: Partial<ScheduleSpec>, from: string, to: string): string[] {
  return iso(ticksBetween(ticksOf({ topic: 't', catchUp: 'none', ...spec }), at(from), at(to), 1000));
}

describe('schedule ticks', () => {
  it('everyMs ticks at the multiples of its period since the epoch, strictly after the start', () => {
    assert.deepEqual(between({ everyMs: 60_000 }, '2026-01-01T00:00:00.000Z', '2026-01-01T00:03:00.000Z'), [
      '2026-01-01T00:01:00.000Z',
      '2026-01-01T00:02:00.000Z',
      '2026-01-01T00:03:00.000Z',
    ]);
    assert.deepEqual(between({ everyMs: 1500 }, '2026-01-01T00:00:00.700Z', '2026-01-01T00:00:04.000Z'), [
      '2026-01-01T00:00:01.500Z',
      '2026-01-01T00:00:03.000Z',
    ]);
  });

  it('a daily 02:30 in Europe/Berlin: once at 03:00 on the spring-forward day, once (the first 02:30) on the fall-back day', () => {
    const berlin = { cron: '30 2 * * *', timezone: 'Europe/Berlin' };
    // 29 March 2026: 02:00 CET jumps to 03:00 CEST, 02:30 does not exist.
    assert.deepEqual(between(berlin, '2026-03-27T12:00:00Z', '2026-03-31T12:00:00Z'), [
      '2026-03-28T01:30:00.000Z', // 02:30 CET
      '2026-03-29T01:00:00.000Z', // 03:00 CEST, the first instant after the gap
      '2026-03-30T00:30:00.000Z', // 02:30 CEST
      '2026-03-31T00:30:00.000Z',
    ]);
    // 25 October 2026: 03:00 CEST falls back to 02:00 CET, 02:30 occurs twice.
    assert.deepEqual(between(berlin, '2026-10-23T12:00:00Z', '2026-10-27T12:00:00Z'), [
      '2026-10-24T00:30:00.000Z', // 02:30 CEST
      '2026-10-25T00:30:00.000Z', // the first 02:30 (CEST) only
      '2026-10-26T01:30:00.000Z', // 02:30 CET
      '2026-10-27T01:30:00.000Z',
    ]);
  });

  it('America/New_York: 02:30 moves to 03:00 EDT in March; 01:30 fires once on the November day it occurs twice', () => {
    assert.deepEqual(between({ cron: '30 2 * * *', timezone: 'America/New_York' }, '2026-03-07T12:00:00Z', '2026-03-09T12:00:00Z'), [
      '2026-03-08T07:00:00.000Z', // 03:00 EDT
      '2026-03-09T06:30:00.000Z', // 02:30 EDT
    ]);
    assert.deepEqual(between({ cron: '30 1 * * *', timezone: 'America/New_York' }, '2026-10-31T12:00:00Z', '2026-11-02T12:00:00Z'), [
      '2026-11-01T05:30:00.000Z', // 01:30 EDT; not again at 01:30 EST (06:30Z)
      '2026-11-02T06:30:00.000Z', // 01:30 EST
    ]);
  });

  it('a wildcard or step in the time fields fires at every matching instant: the gap is skipped, a repeated hour runs twice', () => {
    const every30 = { cron: '*/30 * * * *', timezone: 'America/New_York' };
    assert.deepEqual(between(every30, '2026-11-01T05:00:00Z', '2026-11-01T07:00:00Z'), [
      '2026-11-01T05:30:00.000Z', // 01:30 EDT
      '2026-11-01T06:00:00.000Z', // 01:00 EST
      '2026-11-01T06:30:00.000Z', // 01:30 EST
      '2026-11-01T07:00:00.000Z', // 02:00 EST
    ]);
    assert.deepEqual(between(every30, '2026-03-08T06:00:00Z', '2026-03-08T07:30:00Z'), [
      '2026-03-08T06:30:00.000Z', // 01:30 EST
      '2026-03-08T07:00:00.000Z', // 03:00 EDT: 02:00 and 02:30 do not exist
      '2026-03-08T07:30:00.000Z', // 03:30 EDT
    ]);
  });

  it('a list of hours is a fixed-time job too: its 02:30 fires after the spring gap and once in the repeated hour', () => {
    const twice = { cron: '30 2,14 * * *', timezone: 'Europe/Berlin' };
    assert.deepEqual(between(twice, '2026-03-29T00:00:00Z', '2026-03-29T23:00:00Z'), ['2026-03-29T01:00:00.000Z', '2026-03-29T12:30:00.000Z']);
    assert.deepEqual(between(twice, '2026-10-25T00:00:00Z', '2026-10-25T23:00:00Z'), ['2026-10-25T00:30:00.000Z', '2026-10-25T13:30:00.000Z']);
  });

  it('newest gives the last n ticks at or before a time, oldest first, for cron and everyMs alike', () => {
    const cron = ticksOf({ topic: 't', catchUp: 'none', cron: '0 * * * *', timezone: 'UTC' });
    assert.deepEqual(iso(cron.newest(2, at('2026-01-01T00:00:00Z'), at('2026-01-01T05:00:00Z'))), ['2026-01-01T04:00:00.000Z', '2026-01-01T05:00:00.000Z']);
    assert.deepEqual(iso(cron.newest(9, at('2026-01-01T02:00:00Z'), at('2026-01-01T04:30:00Z'))), ['2026-01-01T03:00:00.000Z', '2026-01-01T04:00:00.000Z']);
    const every = ticksOf({ topic: 't', catchUp: 'none', everyMs: 3_600_000 });
    assert.deepEqual(iso(every.newest(2, at('2026-01-01T00:00:00Z'), at('2026-01-01T05:00:00Z'))), ['2026-01-01T04:00:00.000Z', '2026-01-01T05:00:00.000Z']);
    assert.deepEqual(iso(every.newest(9, at('2026-01-01T02:00:00Z'), at('2026-01-01T04:30:00Z'))), ['2026-01-01T03:00:00.000Z', '2026-01-01T04:00:00.000Z']);
  });
});

describe('the ticks one round publishes', () => {
  const MIN = 60_000;
  const T0 = at('2026-01-01T00:00:00Z');
  const record = (catchUp: CatchUp, lastTick?: number): ScheduleRecord => {
    const r: ScheduleRecord = { name: 's', revision: 'r', spec: { everyMs: MIN, topic: 't', catchUp }, payload: new Uint8Array(), updatedAt: new Date(T0) };
    if (lastTick !== undefined) r.lastTick = new Date(lastTick);
    return r;
  };
  const plan = (r: ScheduleRecord, watched: number | undefined, awakeSince: number, now: number) =>
    planTicks(r, ticksOf(r.spec), watched, awakeSince, now).map((t) => (t - T0) / MIN);

  it('ticks missed before the instance started: none, the latest, or the newest within the bounds, oldest first', () => {
    // Last published at minute 2; the instance started at minute 10.5 and runs its first round at minute 12.
    const cases: Array<[CatchUp, number[]]> = [
      ['none', [11, 12]],
      ['latest', [10, 11, 12]],
      [{ maxTicks: 3 }, [8, 9, 10, 11, 12]],
      [{ withinMs: 4 * MIN }, [8, 9, 10, 11, 12]],
      [{ withinMs: 4 * MIN, maxTicks: 2 }, [9, 10, 11, 12]],
      [{}, [3, 4, 5, 6, 7, 8, 9, 10, 11, 12]],
    ];
    for (const [catchUp, want] of cases) assert.deepEqual(plan(record(catchUp, T0 + 2 * MIN), undefined, T0 + 10.5 * MIN, T0 + 12 * MIN), want, JSON.stringify(catchUp));
  });

  it('a new schedule has no missed ticks: it counts from when it was stored', () => {
    assert.deepEqual(plan(record('latest'), undefined, T0 - 5 * MIN, T0 + 2 * MIN), [1, 2]);
  });

  it('ticks that came due while the instance watched are published however late, whatever catchUp says', () => {
    assert.deepEqual(plan(record('none', T0 + 2 * MIN), T0 + 2.5 * MIN, T0, T0 + 6 * MIN), [3, 4, 5, 6]);
  });

  it('what another instance published, or this one settled in an earlier round, is not published again', () => {
    assert.deepEqual(plan(record('none', T0 + 5 * MIN), T0 + 2.5 * MIN, T0, T0 + 6 * MIN), [6]);
    assert.deepEqual(plan(record('none', T0 + 2 * MIN), T0 + 5.5 * MIN, T0, T0 + 6 * MIN), [6]);
    assert.deepEqual(plan(record('none', T0 + 6 * MIN), undefined, T0, T0 + 6 * MIN), []);
  });

  it('caughtUp with an age bound keeps ticks at most withinMs old', () => {
    const ticks = ticksOf({ everyMs: MIN, topic: 't', catchUp: 'none' });
    assert.deepEqual(caughtUp(ticks, { withinMs: 2 * MIN }, T0, T0 + 10 * MIN, T0 + 10 * MIN).map((t) => (t - T0) / MIN), [8, 9, 10]);
    assert.deepEqual(caughtUp(ticks, { withinMs: 2 * MIN }, T0, T0 + 5 * MIN, T0 + 10 * MIN), []);
  });
});
