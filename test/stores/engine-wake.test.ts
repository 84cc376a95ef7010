/**
 * Engine-level conformance, wake-ups: anything that frees the head
 * of a key lane, or makes a delivery due, wakes the subscription at once, in
 * this queue and through the store's wake source in other instances; a
 * wake-up that finds nothing claimable does not turn into a busy loop. Every
 * case polls once an hour, so a delivery seen within the test's bounds came from
 * a wake-up, not a poll. Also: the attempt count of a delivery dead-lettered
 * after its consumers died counts the handler runs only.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HEADER_DLQ_ATTEMPTS } from '../../src/queue/dead-letter.js';
import { permanent } from '../../src/queue/permanent.js';
import type { SubscribeOptions } from '../../src/queue/options.js';
import type { Delivery } from '../../src/queue/types.js';
import { dec, enc, engineHarness } from './engine-harness.js';
import { STORE_FACTORIES } from './factories.js';
import { HOUR_POLL, counts, deferred, sleep, waitFor } from './helpers.js';

/** Polls so rarely that only a wake-up can deliver within a test. */
const SLOW_POLL: SubscribeOptions = { pollIntervalMs: HOUR_POLL, leaseDurationMs: 2000, backoffBaseMs: 5, backoffMaxMs: 20 };

for (const factory of STORE_FACTORIES) {
  describe(`engine wake-ups: ${factory.name}`, { skip: factory.skip }, () => {
    const t = engineHarness(factory);

    it('200 messages on one key are all delivered, in order, by wake-ups alone', async () => {
      const { q, store } = await t.instance();
      const got: string[] = [];
      await q.subscribe('t', 'g', async (d) => void got.push(dec(d.payload)), { ...SLOW_POLL, concurrency: 8 });
      const names = Array.from({ length: 200 }, (_, i) => `m${i}`);
      await q.publish(...names.map((n) => ({ topic: 't', key: 'k', payload: enc(n) })));
      // Polling alone would take 200 intervals of a minute: finishing at all
      // within the safety deadline shows each ack woke the next claim.
      await waitFor(() => got.length === 200, 180_000, '200 keyed deliveries');
      assert.deepEqual(got, names);
      assert.ok(store.count('claim') < 1000, `claims stay in proportion to the messages (${store.count('claim')})`);
    });

    for (const outcome of ['ack', 'kill'] as const) {
      it(`${outcome === 'ack' ? 'an ack' : 'a kill'} written by one instance wakes another instance waiting behind that key`, async () => {
        const a = await t.instance();
        const b = await t.instance();
        const release = deferred();
        const started = deferred();
        const subA = await a.q.subscribe('t', 'g', async () => {
          started.resolve();
          await release.promise;
          if (outcome === 'kill') throw permanent(new Error('dies'));
        }, { ...SLOW_POLL, concurrency: 1 });
        await a.q.publish({ topic: 't', key: 'k', payload: enc('head') }, { topic: 't', key: 'k', payload: enc('next') });
        await started.promise;
        const gotB: string[] = [];
        await b.q.subscribe('t', 'g', async (d) => void gotB.push(dec(d.payload)), SLOW_POLL);
        await sleep(100); // b has polled, found the lane blocked, and sleeps for a minute
        assert.deepEqual(gotB, []);
        // a stops claiming; its running handler finishes and close writes its outcome.
        const closing = subA.close();
        release.resolve();
        await closing;
        await waitFor(() => gotB.length === 1, 10_000, 'the next message on the other instance');
        assert.deepEqual(gotB, ['next']);
      });
    }

    it('a keyed retry runs when its backoff ends, and the rest of its lane after it, not at the next poll', async () => {
      const { q } = await t.instance();
      const log: string[] = [];
      let failed = false;
      await q.subscribe('t', 'g', async (d) => {
        const name = dec(d.payload);
        if (name === 'a1' && !failed) {
          failed = true;
          throw new Error('once');
        }
        log.push(name);
      }, { ...SLOW_POLL, backoffBaseMs: 200, backoffMaxMs: 200 });
      await q.publish({ topic: 't', key: 'a', payload: enc('a1') }, { topic: 't', key: 'a', payload: enc('a2') });
      await waitFor(() => log.length === 2, 10_000, 'the retry and the next of its lane');
      assert.deepEqual(log, ['a1', 'a2']);
      assert.ok(failed);
    });

    it('a scheduled message runs when due, not at the next poll', async () => {
      const { q } = await t.instance();
      const got: number[] = [];
      await q.subscribe('t', 'g', async () => void got.push(Date.now()), SLOW_POLL);
      const dueAt = Date.now() + 300;
      await q.publish({ topic: 't', key: 'k', payload: enc('later'), deliverAt: new Date(dueAt) });
      await waitFor(() => got.length === 1, 10_000, 'the scheduled message');
      assert.ok(got[0]! >= dueAt, 'not before deliverAt');
    });

    it('a lane head in a long backoff does not spin the claim loop', async () => {
      const { q, store } = await t.instance();
      const runs: string[] = [];
      await q.subscribe('t', 'g', async (d) => {
        runs.push(dec(d.payload));
        if (dec(d.payload) === 'head') throw new Error('back off for a long time');
      }, { ...SLOW_POLL, backoffBaseMs: 30_000, backoffMaxMs: 30_000 });
      await q.publish({ topic: 't', key: 'k', payload: enc('head') });
      await waitFor(() => runs.length === 1);
      await waitFor(async () => (await q.stats('t', 'g')).leased === 0); // the retry is written
      await sleep(50);
      const before = store.count('claim');
      // Wake-ups that find nothing claimable: publishes behind the blocked head.
      for (let i = 0; i < 5; i++) {
        await q.publish({ topic: 't', key: 'k', payload: enc(`behind${i}`) });
        await sleep(40);
      }
      await sleep(500);
      const claims = store.count('claim') - before;
      assert.ok(claims <= 12, `at most a claim or two per wake-up, not a busy loop (${claims} claims)`);
      assert.deepEqual(runs, ['head']);
    });

    it('a lease that lapsed after failed renewals is claimed again once it runs out', async () => {
      const { q, store } = await t.instance();
      const attempts: number[] = [];
      store.before.extend = () => {
        throw new Error('heartbeats fail');
      };
      await q.subscribe('t', 'g', async (d, signal) => {
        attempts.push(d.attempt);
        if (d.attempt === 1) await new Promise((resolve) => signal.addEventListener('abort', resolve));
      }, { ...SLOW_POLL, concurrency: 2, leaseDurationMs: t.ms(300) });
      await q.publish({ topic: 't', payload: enc('x') });
      await waitFor(() => attempts.length === 2, 10_000, 'the redelivery');
      assert.deepEqual(attempts, [1, 2]);
    });

    it('a lease kept by a subscription that closed is taken by another subscription of the queue once it runs out', async () => {
      const { q } = await t.instance();
      const runs: number[] = [];
      const sub = await q.subscribe('t', 'g', async (d, signal) => {
        runs.push(d.attempt);
        await new Promise((resolve) => signal.addEventListener('abort', resolve));
      }, { ...SLOW_POLL, leaseDurationMs: t.ms(300) });
      await q.publish({ topic: 't', payload: enc('x') });
      await waitFor(() => runs.length === 1);
      const later: number[] = [];
      await q.subscribe('t', 'g', async (d) => void later.push(d.attempt), SLOW_POLL);
      await sub.close({ timeoutMs: 10 }); // abandons the handler; its lease is kept
      await waitFor(() => later.length === 1, 10_000, 'the delivery after the lease ran out');
      assert.deepEqual(later, [2]);
    });

    it('a delivery whose consumers died 3 times is dead-lettered with 3 attempts, the number of handler runs', async () => {
      const dead: Delivery[] = [];
      const inspect = await t.instance();
      await inspect.q.subscribe('dlq', 'inspect', async (d) => void dead.push(d), { pollIntervalMs: 20 });
      let runs = 0;
      const opts: SubscribeOptions = { ...SLOW_POLL, pollIntervalMs: 20, maxAttempts: 3, leaseDurationMs: t.ms(300), deadLetterTopic: 'dlq' };
      await inspect.q.publish({ id: 'doomed', topic: 't', payload: enc('x') });
      // Three consumers in a row start the handler and "die": close gives up at once and keeps the lease.
      for (let i = 1; i <= 3; i++) {
        const { q } = await t.instance();
        const sub = await q.subscribe('t', 'g', async (_d, signal) => {
          runs++;
          await new Promise((resolve) => signal.addEventListener('abort', resolve));
        }, { ...opts, startFrom: 'earliest' });
        await waitFor(() => runs === i, 10_000, `run ${i}`);
        await sub.close({ timeoutMs: 1 });
      }
      // The fourth claim is past maxAttempts: dead-lettered without running.
      const { q } = await t.instance();
      const events: number[] = [];
      q.on('deadLettered', (e) => void events.push(e.attempt));
      await q.subscribe('t', 'g', async () => void runs++, opts);
      await waitFor(() => dead.length === 1 && events.length === 1, 10_000, 'the dead-letter copy and event');
      assert.equal(runs, 3);
      assert.deepEqual(events, [3], 'the event counts the attempts that ran, as the header does');
      assert.equal(dead[0]!.headers![HEADER_DLQ_ATTEMPTS], String(runs));
      assert.match(dead[0]!.headers!['x-queue-dlq-error']!, /3 attempts/);
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 0, leased: 0, dead: 1 });
    });
  });
}
