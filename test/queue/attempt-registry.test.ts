/**
 * The attempt registry's rule, step by step: a claim that brings a delivery
 * back gives the older attempt up and waits for whatever of it may still run,
 * however many claims come back before that.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Attempt, AttemptRegistry, type LossCause } from '../../src/queue/attempt.js';
import type { Claimed } from '../../src/queue/types.js';

function attempt(n: number, losses: string[]): Attempt {
  const c: Claimed = { deliveryId: 'd', claimToken: `token-${n}`, group: 'g', attempt: n, message: { id: 'm', topic: 't', payload: new Uint8Array(), publishedAt: new Date(0) } };
  return new Attempt(c, Infinity, Infinity, (a: Attempt, cause: LossCause) => {
    a.state = 'lost';
    losses.push(`${a.c.attempt} ${cause}`);
  });
}

describe('attempt registry', () => {
  it('a third claim that comes back while the second still waits waits for the first, still running', async () => {
    const reg = new AttemptRegistry();
    const losses: string[] = [];
    const first = attempt(1, losses);
    reg.add(first);
    let endFirst!: () => void;
    first.done = new Promise<void>((resolve) => (endFirst = resolve)); // started: its handler runs
    const second = attempt(2, losses);
    reg.add(second); // never starts: a newer claim arrives first
    const third = attempt(3, losses);
    reg.add(third);
    assert.deepEqual(losses, ['1 claim', '2 claim']);
    assert.ok(third.after !== undefined, 'the third waits for something');
    let thirdMayRun = false;
    const waiting = third.after.then(() => (thirdMayRun = true));
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(thirdMayRun, false, 'not while the first is still running');
    endFirst();
    await waiting;
    assert.equal(thirdMayRun, true);
  });

  it('an attempt whose outcome is being written is left to the write: not given up, and the new claim waits for it', async () => {
    const reg = new AttemptRegistry();
    const losses: string[] = [];
    const first = attempt(1, losses);
    reg.add(first);
    let written!: () => void;
    first.done = new Promise<void>((resolve) => (written = resolve));
    first.startWriting(); // its handler returned; a retry is on its way to the store
    const second = attempt(2, losses);
    reg.add(second); // the retry landed and its backoff ended: claimed again before the answer came back
    assert.deepEqual(losses, []);
    assert.equal(first.state, 'writing');
    let secondMayRun = false;
    const waiting = second.after!.then(() => (secondMayRun = true));
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(secondMayRun, false, 'not before the write has answered');
    written();
    await waiting;
    assert.equal(secondMayRun, true);
  });

  it('the same claim added twice gives nothing up; remove forgets only the newest', () => {
    const reg = new AttemptRegistry();
    const losses: string[] = [];
    const a = attempt(1, losses);
    reg.add(a);
    reg.add(a);
    assert.deepEqual(losses, []);
    const b = attempt(2, losses);
    reg.add(b);
    reg.remove(a); // the older one's cleanup leaves the newer one registered
    assert.equal(reg.size, 1);
    reg.remove(b);
    assert.equal(reg.size, 0);
  });
});
