/**
 * The rate limit's hold-off (src/queue/hold-off.ts): how long a subscription
 * sleeps for a store's answer, and that the sleep ends on `end`.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { HoldOff, holdOffMs } from '../../src/queue/hold-off.js';
import { MAX_TIMER_MS } from '../../src/queue/options.js';
import { WAKE_MARGIN_MS } from '../../src/queue/wake-timer.js';

describe('holdOffMs', () => {
  const limit = { max: 5, intervalMs: 1000 };
  it('is the store\'s wait, at least 1 ms and at most the window, plus the clock margin', () => {
    assert.equal(holdOffMs(250, limit), 250 + WAKE_MARGIN_MS);
    assert.equal(holdOffMs(0, limit), 1 + WAKE_MARGIN_MS);
    assert.equal(holdOffMs(-5, limit), 1 + WAKE_MARGIN_MS);
    assert.equal(holdOffMs(5000, limit), 1000 + WAKE_MARGIN_MS);
    assert.equal(holdOffMs(Number.NaN, limit), 1000 + WAKE_MARGIN_MS);
  });
  it('never exceeds the longest delay a Node timer takes (a longer one would fire at once, with a warning)', () => {
    const widest = { max: 1, intervalMs: MAX_TIMER_MS };
    assert.equal(holdOffMs(MAX_TIMER_MS, widest), MAX_TIMER_MS);
    assert.equal(holdOffMs(Infinity, widest), MAX_TIMER_MS);
  });
});

describe('HoldOff', () => {
  it('end() ends the wait in progress and every later one', async () => {
    const h = new HoldOff();
    const waiting = h.wait(MAX_TIMER_MS);
    h.end();
    await waiting;
    await h.wait(MAX_TIMER_MS); // resolves at once: the subscription is closing
  });
});
