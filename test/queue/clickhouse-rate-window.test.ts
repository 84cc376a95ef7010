/**
 * The ClickHouse store's rate-limit window (rate-window.ts), without a
 * server: which recent starts a claim counts, how much room it has, what it
 * records, how long until a full window has room; and, over random
 * sequences of claims, that no window of `intervalMs` ever holds more than
 * `max` recorded starts and that room comes exactly when the wait says.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openWindow, rateWait, recordStarts } from '../../src/queue/stores/clickhouse/rate-window.js';
import type { ClaimStarts } from '../../src/queue/stores/clickhouse/rate-window.js';

const none: ClaimStarts = { starts: [], counts: [] };

describe('clickhouse rate-limit window', () => {
  it('counts the starts less than intervalMs old', () => {
    const recent = { starts: [100, 500, 1000], counts: [2, 1, 3] };
    const w = openWindow(recent, 1499, { max: 10, intervalMs: 1000 });
    assert.deepEqual([w.at, w.room, w.kept], [1499, 6, { starts: [500, 1000], counts: [1, 3] }]);
    assert.equal(openWindow(recent, 1500, { max: 10, intervalMs: 1000 }).room, 7, 'a start exactly intervalMs old is out');
    assert.equal(openWindow(recent, 1000, { max: 5, intervalMs: 1000 }).room, 0, 'never below zero');
  });

  it('records a claim at the newest start at least, merging starts of one instant', () => {
    const recent = { starts: [100, 2000], counts: [1, 2] };
    const w = openWindow(recent, 1990, { max: 10, intervalMs: 1000 });
    assert.equal(w.at, 2000, 'a clock estimate behind the newest start records at that start');
    assert.deepEqual(recordStarts(w, 3), { starts: [2000], counts: [5] });
    const later = openWindow(recent, 2500, { max: 10, intervalMs: 1000 });
    assert.deepEqual(recordStarts(later, 1), { starts: [2000, 2500], counts: [2, 1] });
    assert.deepEqual(recordStarts(openWindow(none, 7, { max: 1, intervalMs: 1 }), 1), { starts: [7], counts: [1] });
  });

  it('the wait for room is until all but max - 1 starts are intervalMs old, 1 to intervalMs', () => {
    const recent = { starts: [1000, 1200, 1500], counts: [2, 1, 1] };
    assert.equal(rateWait(recent, 1500, { max: 2, intervalMs: 1000 }), 700, 'three must leave: the two of 1000 and the one of 1200');
    assert.equal(rateWait(recent, 1500, { max: 3, intervalMs: 1000 }), 500, 'two must leave, both of 1000');
    assert.equal(rateWait(recent, 1500, { max: 4, intervalMs: 1000 }), 500, 'one must leave: one of 1000');
    assert.equal(rateWait(recent, 1500, { max: 5, intervalMs: 1000 }), 1, 'room already');
    assert.equal(rateWait({ starts: [1500], counts: [3] }, 1500, { max: 2, intervalMs: 1000 }), 1000, 'at most intervalMs');
  });

  it('random claims at random (sometimes earlier) clock readings never put more than max starts in any window', () => {
    for (let run = 0; run < 200; run++) {
      const max = 1 + Math.floor(Math.random() * 6);
      const intervalMs = 1 + Math.floor(Math.random() * 50);
      let recent = none;
      let clock = 0;
      const all: number[] = [];
      for (let claim = 0; claim < 100; claim++) {
        clock += Math.floor(Math.random() * 20) - 3; // estimates of two instances may run a little behind
        const w = openWindow(recent, Math.max(0, clock), { max, intervalMs });
        const n = Math.floor(Math.random() * (w.room + 1));
        if (n === 0) continue;
        recent = recordStarts(w, n);
        for (let i = 0; i < n; i++) all.push(w.at);
        const wait = rateWait(recent, w.at, { max, intervalMs });
        assert.ok(openWindow(recent, w.at + wait, { max, intervalMs }).room >= 1, 'room once the wait is over');
        if (wait > 1) assert.equal(openWindow(recent, w.at + wait - 1, { max, intervalMs }).room, 0, 'no room a moment before');
      }
      assert.deepEqual(all, [...all].sort((a, b) => a - b), 'starts are recorded in order');
      for (let i = 0; i + max < all.length; i++) assert.ok(all[i + max]! - all[i]! >= intervalMs, `run ${run}: ${max + 1} starts within ${intervalMs} ms`);
    }
  });
});
