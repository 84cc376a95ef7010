/**
 * `stats().oldestPendingAgeMs` on every store: how long the longest-waiting
 * due delivery has been claimable, from its due time, backoff end or lease
 * expiry; deliveries not due yet do not count.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { Store } from '../../src/queue/types.js';
import { STORE_FACTORIES } from './factories.js';
import type { StoreHarness } from './factories.js';
import { claimReq, msg, waitFor } from './helpers.js';

/** Asserts `v` is within [lo, hi]. */
function between(v: number, lo: number, hi: number, what: string): void {
  assert.ok(v >= lo && v <= hi, `${what}: ${v} not in [${lo}, ${hi}]`);
}

/** Room for a database clock a little ahead of ours (ms). */
const CLOCK_SLACK = 1500;
/**
 * Room for one a little behind (ms): ClickHouse before version 20 tells
 * seconds, and its clock is placed by sampling, which a loaded machine's
 * round trips blur (4942 for 5000 once). Small beside the gaps the tests
 * tell apart (5000 against 1000, 2000 against 3000).
 */
const CLOCK_BEHIND = 300;

/** An age that started `lo` ms before `since` (local ms): at least `lo`, at most `lo` plus the time since then, give or take the clocks. */
function ageSince(v: number, lo: number, since: number, what: string): void {
  between(v, Math.max(0, lo - CLOCK_BEHIND), lo + (Date.now() - since) + CLOCK_SLACK, what);
}

for (const factory of STORE_FACTORIES) {
  describe(`oldest pending age: ${factory.name}`, { skip: factory.skip }, () => {
    let h: StoreHarness;
    let s: Store;
    beforeEach(async () => {
      h = await factory.create();
      s = await h.open();
    });
    afterEach(() => h.cleanup());

    it('is 0 with nothing pending, and counts from the publish time of the oldest due delivery', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      assert.equal((await s.stats('t', 'g')).oldestPendingAgeMs, 0);
      const now = Date.now();
      await s.append([msg('t', { id: 'new', publishedAt: new Date(now - 1000) }), msg('t', { id: 'old', publishedAt: new Date(now - 5000) })]);
      ageSince((await s.stats('t', 'g')).oldestPendingAgeMs, 5000, now, 'the older of two');
    });

    it('leaves out scheduled deliveries and leased ones; counts a keyed delivery held behind its key', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      const now = Date.now();
      await s.append([msg('t', { id: 'later', publishedAt: new Date(now - 9000), deliverAt: new Date(now + 60_000) })]);
      assert.equal((await s.stats('t', 'g')).oldestPendingAgeMs, 0, 'scheduled: not due, so not waiting');
      await s.append([msg('t', { id: 'k1', key: 'k', publishedAt: new Date(now - 3000) }), msg('t', { id: 'k2', key: 'k', publishedAt: new Date(now - 2000) })]);
      const cs = await s.claim(claimReq('t', 'g'));
      assert.deepEqual(cs.map((c) => c.message.id), ['k1']);
      const st = await s.stats('t', 'g');
      assert.deepEqual([st.pending, st.leased], [2, 1]);
      ageSince(st.oldestPendingAgeMs, 2000, now, 'k2 waits behind k1; k1 is leased');
    });

    it('counts a retried delivery from the end of its backoff, and a lapsed lease from its expiry', async () => {
      // A backoff and a lease of 2 s: a loaded machine still reads the stats
      // before they end; after, the age is bracketed by our own clock reads.
      await s.ensureGroup('t', 'g', 'latest');
      await s.append([msg('t', { id: 'a', publishedAt: new Date(Date.now() - 10_000) })]);
      const [c] = await s.claim(claimReq('t', 'g'));
      const retried = Date.now();
      assert.equal(await s.retry(c!, 2000, 'x'), true);
      assert.equal((await s.stats('t', 'g')).oldestPendingAgeMs, 0, 'in backoff');
      await waitFor(async () => (await s.stats('t', 'g')).oldestPendingAgeMs > 0, 120_000, 'the backoff to end');
      ageSince((await s.stats('t', 'g')).oldestPendingAgeMs, 0, retried + 2000, 'due since its backoff ended, not since its publish');
      const claimed = Date.now();
      assert.equal((await s.claim(claimReq('t', 'g', { leaseMs: 2000 }))).length, 1);
      assert.equal((await s.stats('t', 'g')).oldestPendingAgeMs, 0, 'leased');
      await waitFor(async () => (await s.stats('t', 'g')).oldestPendingAgeMs > 0, 120_000, 'the lease to expire');
      const st = await s.stats('t', 'g');
      assert.deepEqual([st.pending, st.leased], [1, 0]);
      ageSince(st.oldestPendingAgeMs, 0, claimed + 2000, 'claimable since its lease expired, not since its publish');
    });
  });
}
