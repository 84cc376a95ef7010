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
import { claimReq, msg, sleep } from './helpers.js';

/** Asserts `v` is within [lo, hi]. */
function between(v: number, lo: number, hi: number, what: string): void {
  assert.ok(v >= lo && v <= hi, `${what}: ${v} not in [${lo}, ${hi}]`);
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
      between((await s.stats('t', 'g')).oldestPendingAgeMs, 5000, 6500, 'the older of two');
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
      between(st.oldestPendingAgeMs, 2000, 3500, 'k2 waits behind k1; k1 is leased');
    });

    it('counts a retried delivery from the end of its backoff, and a lapsed lease from its expiry', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      await s.append([msg('t', { id: 'a', publishedAt: new Date(Date.now() - 10_000) })]);
      const [c] = await s.claim(claimReq('t', 'g'));
      assert.equal(await s.retry(c!, 100, 'x'), true);
      assert.equal((await s.stats('t', 'g')).oldestPendingAgeMs, 0, 'in backoff');
      await sleep(250);
      between((await s.stats('t', 'g')).oldestPendingAgeMs, 100, 1000, 'due since its backoff ended');
      await s.claim(claimReq('t', 'g', { leaseMs: 100 }));
      assert.equal((await s.stats('t', 'g')).oldestPendingAgeMs, 0, 'leased');
      await sleep(250);
      const st = await s.stats('t', 'g');
      assert.deepEqual([st.pending, st.leased], [1, 0]);
      between(st.oldestPendingAgeMs, 100, 1000, 'claimable since its lease expired');
    });
  });
}
