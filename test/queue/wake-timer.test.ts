/**
 * The queue's timed wake-ups: one timer for the earliest, the rest in a
 * heap. A wake-up further off than Node's longest timer (MAX_TIMER_MS, about
 * 24.8 days: a `deliverAt` that far ahead is allowed with a long
 * `retentionHours`) must wait in steps of that timer, not spin on a timer
 * that Node cuts to 1 ms.
 */
import assert from 'node:assert/strict';
import { describe, it, mock } from 'node:test';
import { MAX_TIMER_MS } from '../../src/queue/options.js';
import { WAKE_MARGIN_MS, WakeTimer } from '../../src/queue/wake-timer.js';

const DAY = 24 * 3600 * 1000;

describe('WakeTimer', () => {
  it('wakes in time order, each topic once per firing', () => {
    mock.timers.enable({ apis: ['setTimeout'] });
    let now = 1_000_000;
    const woken: string[] = [];
    const t = new WakeTimer((topic) => woken.push(topic), () => now);
    try {
      t.schedule('b', now + 200);
      t.schedule('a', now + 100);
      t.schedule('a', now + 100);
      const step = (ms: number) => {
        now += ms;
        mock.timers.tick(ms);
      };
      step(100 + WAKE_MARGIN_MS);
      assert.deepEqual(woken, ['a']);
      step(100);
      assert.deepEqual(woken, ['a', 'b']);
      assert.equal(t.size, 0);
    } finally {
      t.stop();
      mock.timers.reset();
    }
  });

  it('a wake-up 30 days off waits in steps of the longest timer and fires once when due', () => {
    mock.timers.enable({ apis: ['setTimeout'] });
    let now = 1_000_000;
    const woken: string[] = [];
    const t = new WakeTimer((topic) => woken.push(topic), () => now);
    const step = (ms: number) => {
      now += ms;
      mock.timers.tick(ms);
    };
    try {
      t.schedule('far', now + 30 * DAY);
      step(MAX_TIMER_MS);
      assert.deepEqual(woken, [], 'the first timer fires early and finds nothing due');
      assert.equal(t.size, 1);
      // A nearer wake-up scheduled meanwhile still comes first.
      t.schedule('near', now + 1000);
      step(1000 + WAKE_MARGIN_MS);
      assert.deepEqual(woken, ['near']);
      step(30 * DAY - MAX_TIMER_MS - 1000 - WAKE_MARGIN_MS - 1);
      assert.deepEqual(woken, ['near'], 'not before it is due');
      step(1 + WAKE_MARGIN_MS);
      assert.deepEqual(woken, ['near', 'far']);
      assert.equal(t.size, 0);
    } finally {
      t.stop();
      mock.timers.reset();
    }
  });

  it('with real timers, a wake-up 30 days off sets no timer Node has to cut short', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => void warnings.push(w.name);
    process.on('warning', onWarning);
    const woken: string[] = [];
    const t = new WakeTimer((topic) => woken.push(topic));
    try {
      t.schedule('far', Date.now() + 30 * DAY);
      // Node reports a cut-short timer on the next tick; give a spinning timer a few rounds too.
      for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 5));
      assert.deepEqual(warnings.filter((n) => n === 'TimeoutOverflowWarning'), []);
      assert.deepEqual(woken, []);
    } finally {
      t.stop();
      process.off('warning', onWarning);
    }
  });
});
