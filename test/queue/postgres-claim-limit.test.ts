/**
 * The Postgres store's claim limit from its budget counts (claim-limit.ts):
 * the least of the batch, the in-flight cap's room and the rate limit's
 * room; and the wait it reports only when the rate limit is what kept the
 * claim short and the claim took all the room there was.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { claimLimit } from '../../src/queue/stores/postgres/claim-limit.js';
import type { ClaimRequest } from '../../src/queue/types.js';

const req = (extra: Partial<ClaimRequest> = {}): ClaimRequest => ({ topic: 't', group: 'g', runnerId: 'r', max: 10, leaseMs: 1000, maxInFlight: 0, ...extra });
const budget = (started: number, roomInMs: number | null = null, inFlight = 0) => ({ in_flight: inFlight, started, room_in_ms: roomInMs });
const rate = { max: 50, intervalMs: 1000 };

describe('postgres claim limit', () => {
  it('without a rate limit: the batch, or the in-flight cap\'s room; never a wait', () => {
    assert.equal(claimLimit(req(), budget(0)).limit, 10);
    assert.equal(claimLimit(req({ maxInFlight: 4 }), budget(0, null, 1)).limit, 3);
    assert.equal(claimLimit(req({ maxInFlight: 4 }), budget(0, null, 5)).limit, -1);
    assert.equal(claimLimit(req({ maxInFlight: 4 }), budget(0, null, 1)).rateWait(3), undefined);
  });

  it('with a rate limit: at most the room left in the window', () => {
    assert.equal(claimLimit(req({ rateLimit: rate }), budget(45, 300)).limit, 5);
    assert.equal(claimLimit(req({ rateLimit: rate }), budget(50, 300)).limit, 0);
    assert.equal(claimLimit(req({ rateLimit: rate, maxInFlight: 3 }), budget(45, 300, 1)).limit, 2);
  });

  it('reports a wait only when the rate limit cut the claim short and the claim took all its room', () => {
    // Room 5 of a batch of 10: took all 5, so more may be due; room when the oldest claim leaves.
    assert.equal(claimLimit(req({ rateLimit: rate }), budget(45, 300.2)).rateWait(5), 301);
    // Took fewer than the room: nothing more was due.
    assert.equal(claimLimit(req({ rateLimit: rate }), budget(45, 300)).rateWait(4), undefined);
    // The window is full: no claim ran.
    assert.equal(claimLimit(req({ rateLimit: rate }), budget(50, 20)).rateWait(0), 20);
    // Room enough for the whole batch: not rate-limited.
    assert.equal(claimLimit(req({ rateLimit: rate }), budget(40, 300)).rateWait(10), undefined);
    // The in-flight cap bound first: not the rate limit's doing.
    assert.equal(claimLimit(req({ rateLimit: rate, maxInFlight: 3 }), budget(45, 300)).rateWait(3), undefined);
  });

  it('with no claim in the window before, the claim\'s own leaves it after the interval; the wait stays within 1 ms and the interval', () => {
    assert.equal(claimLimit(req({ max: 100, rateLimit: rate }), budget(0)).rateWait(50), 1000);
    assert.equal(claimLimit(req({ rateLimit: rate }), budget(50, -3)).rateWait(0), 1);
    assert.equal(claimLimit(req({ rateLimit: rate }), budget(50, 5000)).rateWait(0), 1000);
  });
});
