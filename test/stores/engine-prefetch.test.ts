/**
 * Engine-level conformance, `prefetch`: a subscription may hold deliveries
 * claimed beyond its running handlers, waiting for a slot. Running handlers
 * never exceed `concurrency`; waiting deliveries are released unrun at close,
 * and one whose lease lapsed while it waited never runs under that claim.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgumentError } from '../../src/errors.js';
import { dec, enc, engineHarness, FAST } from './engine-harness.js';
import { STORE_FACTORIES } from './factories.js';
import { claimReq, deferred, sleep, waitFor, counts } from './helpers.js';

for (const factory of STORE_FACTORIES) {
  describe(`engine prefetch: ${factory.name}`, { skip: factory.skip }, () => {
    const t = engineHarness(factory);

    it('claims fill the prefetch while every slot is busy; running handlers never exceed concurrency', async () => {
      const { q, store } = await t.instance();
      await q.publish(...Array.from({ length: 40 }, (_, i) => ({ topic: 't', payload: enc(`m${i}`) })));
      let running = 0;
      let peak = 0;
      const seen = new Map<string, number>();
      await q.subscribe('t', 'g', async (d) => {
        running++;
        peak = Math.max(peak, running);
        await sleep(10);
        running--;
        seen.set(d.id, (seen.get(d.id) ?? 0) + 1);
      }, { ...FAST, concurrency: 2, batchSize: 6, prefetch: 8, startFrom: 'earliest' });
      await waitFor(async () => seen.size === 40 && (await q.stats('t', 'g')).leased === 0, 10_000, 'every message');
      assert.equal(peak, 2);
      assert.ok([...seen.values()].every((n) => n === 1));
      assert.ok(store.claimMax.every((m) => m >= 1 && m <= 6), `claim sizes ${store.claimMax.join(',')}`);
      assert.ok(store.claimMax.some((m) => m > 2), `no claim asked for more than the free slots: ${store.claimMax.join(',')}`);
    });

    it('close releases prefetched deliveries that never started, without spending an attempt', async () => {
      const { q, store } = await t.instance();
      const started = deferred();
      const gate = deferred();
      const ran: string[] = [];
      const sub = await q.subscribe('t', 'g', async (d) => {
        ran.push(dec(d.payload));
        started.resolve();
        await gate.promise;
      }, { ...FAST, concurrency: 1, batchSize: 5, prefetch: 4, startFrom: 'earliest' });
      await q.publish(...['a', 'b', 'c', 'd', 'e'].map((p) => ({ topic: 't', payload: enc(p) })));
      await started.promise;
      await waitFor(async () => (await q.stats('t', 'g')).leased === 5, 5000, 'the prefetch to fill');
      const closing = sub.close({ timeoutMs: 5000 });
      await sleep(20);
      gate.resolve();
      await closing;
      assert.deepEqual(ran, ['a']);
      assert.equal(store.count('release'), 1);
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 4, leased: 0, dead: 0 });
      const again = await store.inner.claim(claimReq('t', 'g'));
      assert.deepEqual(again.map((c) => [dec(c.message.payload), c.attempt]), [['b', 1], ['c', 1], ['d', 1], ['e', 1]]);
      await store.inner.release(again);
    });

    it('a prefetched delivery whose lease lapsed while it waited does not run under that claim', async () => {
      const { q, store } = await t.instance();
      store.before.extend = () => {
        throw new Error('heartbeat refused');
      };
      const runs: Array<[string, number]> = [];
      const firstAborted = deferred();
      await q.subscribe('t', 'g', async (d, signal) => {
        runs.push([dec(d.payload), d.attempt]);
        if (d.attempt === 1) {
          await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
          store.before.extend = undefined; // heartbeats work again from here on
          firstAborted.resolve();
        }
      }, { ...FAST, concurrency: 1, batchSize: 3, prefetch: 2, leaseDurationMs: t.ms(150), startFrom: 'earliest' });
      await q.publish(...['a', 'b', 'c'].map((p) => ({ topic: 't', payload: enc(p) })));
      await firstAborted.promise;
      await waitFor(async () => runs.length === 4 && (await q.stats('t', 'g')).leased === 0, 10_000, 'the redeliveries');
      const byMessage = new Map<string, number[]>();
      for (const [p, a] of runs) byMessage.set(p, [...(byMessage.get(p) ?? []), a]);
      assert.deepEqual(byMessage.get('a'), [1, 2]);
      assert.deepEqual(byMessage.get('b'), [2], 'b ran under its lapsed first claim');
      assert.deepEqual(byMessage.get('c'), [2], 'c ran under its lapsed first claim');
    });

    it('prefetch must be a whole number ≥ 0', async () => {
      const { q } = await t.instance();
      await assert.rejects(q.subscribe('t', 'g', async () => undefined, { prefetch: -1 }), InvalidArgumentError);
      await assert.rejects(q.subscribe('t', 'g', async () => undefined, { prefetch: 1.5 }), InvalidArgumentError);
    });
  });
}
