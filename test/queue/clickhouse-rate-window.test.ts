/**
 * The ClickHouse store's rate-limit window (rate-window.ts), without a
 * server: which recent starts a claim counts, how much room it has, what it
 * records; and, over random sequences of claims, that no window of
 * `intervalMs` ever holds more than `max` recorded starts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { openWindow, recordStarts } from '../../src/queue/stores/clickhouse/rate-window.js';
import type { ClaimStarts } from '../../src/queue/stores/clickhouse/rate-window.js';

const none: ClaimStarts = { starts: [], counts: [] };

describe('clickhouse rate-limit window', () => {
  it('counts the starts at most intervalMs old, an exactly interval-old one included', () => {
    const recent = { starts: [100, 500, 1000], counts: [2, 1, 3] };
    const w = openWindow(recent, 1500, { max: 10, intervalMs: 1000 });
    assert.deepEqual([w.at, w.room, w.kept], [1500, 6, { starts: [500, 1000], counts: [1, 3] }]);
    assert.equal(openWindow(recent, 1501, { max: 10, intervalMs: 1000 }).room, 7);
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
      }
      assert.deepEqual(all, [...all].sort((a, b) => a - b), 'starts are recorded in order');
      for (let i = 0; i + max < all.length; i++) assert.ok(all[i + max]! - all[i]! > intervalMs, `run ${run}: ${max + 1} starts within ${intervalMs} ms`);
    }
  });
});
