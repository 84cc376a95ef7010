import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Throughput, WINDOW_S } from '../../src/dashboard/throughput.js';
import type { GroupRow } from '../../src/dashboard/source.js';

const row = (group: string, dead: number, pending = 0, leased = 0): GroupRow => ({ topic: 't', group, pending, leased, dead, oldestPendingAgeMs: null, paused: false });
const sum = (xs: (number | null)[]) => xs.reduce<number>((n, x) => n + (x ?? 0), 0);

test('events: each completion and dead letter counts in its own second, for 15 minutes', () => {
  let now = 1_000_000_000;
  const t = new Throughput('events', () => now);
  t.count('completed');
  t.count('completed');
  now += 1000;
  t.count('deadLettered');
  t.sample([row('a', 0, 5, 2)]);
  const s = t.series();
  assert.equal(s.t.length, WINDOW_S);
  assert.equal(s.t.at(-1), now / 1000);
  assert.deepEqual(s.completed.slice(-2), [2, 0]);
  assert.deepEqual(s.deadLettered.slice(-2), [0, 1]);
  assert.equal(s.backlog.at(-1), 7);
  assert.equal(s.completed.at(-3), null, 'before counting began: unknown, not zero');
  now += WINDOW_S * 1000;
  const later = t.series();
  assert.equal(sum(later.completed) + sum(later.deadLettered), 0, 'older than the window: gone');
  assert.equal(later.completed.every((x) => x === 0), true);
});

test('sampled: the dead-lettered rate is the rise in dead counts spread over the seconds between samples', () => {
  let now = 2_000_000_000;
  const t = new Throughput('sampled', () => now);
  t.sample([row('a', 10), row('b', 4)]); // baseline: nothing counted
  assert.equal(sum(t.series().deadLettered), 0);
  now += 400;
  t.sample([row('a', 12), row('b', 4)]); // same second: carried
  now += 3600; // 4 s after the baseline
  t.sample([row('a', 14), row('b', 3), row('c', 2)]); // b fell (purged): 0, c is new: from 0
  const s = t.series();
  assert.deepEqual(s.completed.slice(-5), [null, 0, 0, 0, 0], 'no backlog fell: nothing completed');
  assert.deepEqual(s.deadLettered.slice(-5), [null, 1.5, 1.5, 1.5, 1.5]); // a rose 4, c 2: 6 over 4 s
  assert.equal(sum(s.deadLettered), 6);
});

test('sampled: the completed rate is the fall in pending + leased less the rise in dead, never negative', () => {
  let now = 3_000_000_000;
  const t = new Throughput('sampled', () => now);
  t.sample([row('a', 0, 50, 10), row('b', 0, 5, 0)]); // baseline
  now += 2000;
  // a: backlog 60 → 20 with 10 more dead: 30 completed. b: backlog grew (publishes): 0, not negative.
  t.sample([row('a', 10, 15, 5), row('b', 0, 9, 0)]);
  now += 1000;
  // c appears holding 7: nothing known about what it held before, so nothing completed there.
  t.sample([row('a', 10, 15, 5), row('b', 0, 9, 0), row('c', 0, 7, 0)]);
  const s = t.series();
  assert.equal(s.mode, 'sampled');
  assert.deepEqual(s.completed.slice(-4), [null, 15, 15, 0]);
  assert.deepEqual(s.deadLettered.slice(-4), [null, 5, 5, 0]);
  assert.equal(sum(s.completed), 30);
  assert.equal(s.backlog.at(-1), 20 + 9 + 7);
});
