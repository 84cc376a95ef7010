/**
 * Store-level conformance of the schedule methods of the Store SPI
 * (`putSchedule`, `deleteSchedule`, `listSchedules`, `advanceSchedule`),
 * through the SPI alone, on every store that implements them
 * (schedule-stores.ts says which skip).
 */
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import type { ScheduleRecord } from '../../src/queue/schedules/types.js';
import type { Store } from '../../src/queue/types.js';
import { harnessPerTest } from './helpers.js';
import { SCHEDULE_FACTORIES } from './schedule-stores.js';

const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const ALL_BYTES = Uint8Array.from({ length: 256 }, (_, i) => i);

function record(name: string, revision = 'r1', extra: Partial<ScheduleRecord> = {}): ScheduleRecord {
  return {
    name,
    revision,
    spec: { cron: '30 2 * * *', timezone: 'Europe/Berlin', topic: 'jobs', key: 'k ü', headers: { a: 'b', 'x-y': 'ünïcode ✓' }, catchUp: { maxTicks: 3, withinMs: 60_000 } },
    payload: ALL_BYTES,
    updatedAt: new Date(T0 + 123),
    ...extra,
  };
}

/** `r` as a store gives it back: plain bytes, no `lastTick` unless set. */
function plain(r: ScheduleRecord): ScheduleRecord {
  const out: ScheduleRecord = { name: r.name, revision: r.revision, spec: r.spec, payload: Uint8Array.from(r.payload), updatedAt: r.updatedAt };
  if (r.lastTick !== undefined) out.lastTick = r.lastTick;
  return out;
}

const listed = async (s: Store) => (await s.listSchedules!()).map((r) => ({ ...r, payload: Uint8Array.from(r.payload) }));

for (const { factory, skip } of SCHEDULE_FACTORIES) {
  describe(`store level, schedules: ${factory.name}`, { skip }, () => {
    const t = harnessPerTest(factory);
    let s: Store;
    beforeEach(async () => {
      s = await t.h.open();
    });

    it('putSchedule stores a new schedule whole; listSchedules gives it back exactly', async () => {
      assert.deepEqual(await s.listSchedules!(), []);
      const r = record('nightly');
      assert.equal(await s.putSchedule!(r), true);
      assert.deepEqual(await listed(s), [plain(r)]);
      // Another instance sees it too.
      assert.deepEqual(await listed(await t.h.open()), [plain(r)]);
    });

    it('the same revision again changes nothing, progress included; another revision replaces it whole and clears its progress', async () => {
      assert.equal(await s.putSchedule!(record('s')), true);
      assert.equal(await s.advanceSchedule!('s', 'r1', new Date(T0 + 5000)), true);
      assert.equal(await s.putSchedule!(record('s', 'r1', { updatedAt: new Date(T0 + 9999) })), false);
      assert.deepEqual(await listed(s), [plain({ ...record('s'), lastTick: new Date(T0 + 5000) })]);

      const changed = record('s', 'r2', { spec: { everyMs: 1000, topic: 'other', catchUp: 'none' }, payload: new Uint8Array(), updatedAt: new Date(T0 + 7000) });
      assert.equal(await s.putSchedule!(changed), true);
      assert.deepEqual(await listed(s), [plain(changed)]);
      // The old revision can no longer be advanced.
      assert.equal(await s.advanceSchedule!('s', 'r1', new Date(T0 + 8000)), false);
      assert.deepEqual(await listed(s), [plain(changed)]);
    });

    it('listSchedules sorts by name in code-unit order; names of the longest length work', async () => {
      const long = 'z'.repeat(200);
      for (const name of ['b', long, 'B', 'a.b', 'a-b', 'A_1']) assert.equal(await s.putSchedule!(record(name)), true);
      assert.deepEqual((await s.listSchedules!()).map((r) => r.name), ['A_1', 'B', 'a-b', 'a.b', 'b', long]);
    });

    it('deleteSchedule removes it and says whether it existed', async () => {
      await s.putSchedule!(record('a'));
      await s.putSchedule!(record('b'));
      assert.equal(await s.deleteSchedule!('a'), true);
      assert.equal(await s.deleteSchedule!('a'), false);
      assert.equal(await s.deleteSchedule!('never'), false);
      assert.deepEqual((await s.listSchedules!()).map((r) => r.name), ['b']);
      assert.equal(await s.advanceSchedule!('a', 'r1', new Date(T0)), false);
      // Stored again, it starts afresh.
      assert.equal(await s.putSchedule!(record('a')), true);
      assert.equal((await s.listSchedules!())[0]!.lastTick, undefined);
    });

    it('advanceSchedule moves lastTick forward only, and only for the revision stored', async () => {
      await s.putSchedule!(record('s'));
      assert.equal(await s.advanceSchedule!('s', 'r1', new Date(T0 + 3000)), true);
      assert.equal(await s.advanceSchedule!('s', 'r1', new Date(T0 + 1000)), true, 'behind: still the stored revision');
      assert.deepEqual((await s.listSchedules!())[0]!.lastTick, new Date(T0 + 3000));
      assert.equal(await s.advanceSchedule!('s', 'other', new Date(T0 + 9000)), false);
      assert.equal(await s.advanceSchedule!('nope', 'r1', new Date(T0 + 9000)), false);
      assert.equal(await s.advanceSchedule!('s', 'r1', new Date(T0 + 3001)), true);
      assert.deepEqual((await s.listSchedules!())[0]!.lastTick, new Date(T0 + 3001));
    });

    it('instances advancing at once leave the newest tick, whatever order they finish in', async () => {
      await s.putSchedule!(record('s'));
      const others = [s, await t.h.open(), await t.h.open()];
      const ticks = Array.from({ length: 30 }, (_, i) => T0 + (i + 1) * 1000).sort(() => Math.random() - 0.5);
      const held = await Promise.all(ticks.map((t, i) => others[i % others.length]!.advanceSchedule!('s', 'r1', new Date(t))));
      assert.ok(held.every(Boolean));
      assert.deepEqual((await s.listSchedules!())[0]!.lastTick, new Date(T0 + 30_000));
    });

    it('puts of one name at once from two instances leave one of them whole', async () => {
      const other = await t.h.open();
      const a = record('s', 'ra', { spec: { everyMs: 1000, topic: 'ta', catchUp: 'none' }, payload: new Uint8Array([1]) });
      const b = record('s', 'rb', { spec: { everyMs: 2000, topic: 'tb', catchUp: 'latest' }, payload: new Uint8Array([2]) });
      const [pa, pb] = await Promise.all([s.putSchedule!(a), other.putSchedule!(b)]);
      assert.ok(pa && pb, 'different revisions: each call stored its own');
      const [got] = await listed(s);
      assert.ok(isDeepStrictEqual(got, plain(a)) || isDeepStrictEqual(got, plain(b)), `not one of the two whole: ${JSON.stringify(got)}`);

      // The same revision from two instances at once: stored by exactly one.
      const c = record('t', 'rc');
      const both = await Promise.all([s.putSchedule!(c), other.putSchedule!(c)]);
      assert.deepEqual(both.sort(), [false, true]);
    });
  });
}
