/**
 * Engine-level conformance, the shared poller (due-poller.ts): idle
 * subscriptions make no claims, only the one poll query per tick, however
 * many there are; work another instance makes due (a publish, a scheduled
 * message coming due, a lease that ran out) is found by that query and
 * wakes only the subscription it is for. The instances here have no wake
 * source (`listen` is removed), so nothing but the poller can find
 * another instance's work. Also: subscribing, closing and closing the
 * queue while a poll query is in flight.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DuePoller } from '../../src/queue/due-poller.js';
import type { SubscribeOptions } from '../../src/queue/options.js';
import type { ClaimRequest, ConsumerGroup, Subscription } from '../../src/queue/types.js';
import { dec, enc, engineHarness } from './engine-harness.js';
import { STORE_FACTORIES } from './factories.js';
import { InstrumentedStore, claimReq, deferred, msg, sleep, waitFor } from './helpers.js';

/** A short poll, so the tests see many ticks; no other wake-up reaches another instance. */
const POLL: SubscribeOptions = { pollIntervalMs: 20, leaseDurationMs: 2000, backoffBaseMs: 5, backoffMaxMs: 20 };

for (const factory of STORE_FACTORIES) {
  describe(`engine poller: ${factory.name}`, { skip: factory.skip }, () => {
    const t = engineHarness(factory);
    const ms = t.ms;

    /** A queue over a new handle (another instance) with no wake source; claims are logged by topic. */
    async function instance() {
      const { q, store } = await t.instance({}, ['listen']);
      const claimed: string[] = [];
      store.before.claim = (req: ClaimRequest) => void claimed.push(req.topic);
      return { q, store, claimed, poller: DuePoller.of(store) };
    }

    /** Waits for `n` more poll ticks of `store`'s poller that asked the store. */
    async function ticks(store: InstrumentedStore, n: number) {
      const from = store.count('duePairs');
      await waitFor(() => store.count('duePairs') >= from + n, 30_000, `${n} poll ticks`);
    }

    for (const fillers of [0, 300]) {
      it(`duePairs over ${fillers + 7} pairs names exactly those with claimable work`, async () => {
        const store = await t.h.open();
        for (const t of ['due', 'sched', 'held', 'lapsed', 'retried', 'idle']) await store.ensureGroup(t, 'g', 'earliest');
        for (let i = 0; i < fillers; i += 50) await Promise.all(Array.from({ length: Math.min(50, fillers - i) }, (_, j) => store.ensureGroup('filler', `f${i + j}`, 'latest')));
        await store.append([
          msg('due'), msg('sched', { deliverAt: new Date(Date.now() + 3_600_000) }), msg('held'), msg('lapsed'), msg('retried'), msg('unregistered'),
        ]);
        assert.equal((await store.claim(claimReq('held', 'g', { leaseMs: 600_000 }))).length, 1);
        assert.equal((await store.claim(claimReq('lapsed', 'g', { leaseMs: 1 }))).length, 1);
        const [r] = await store.claim(claimReq('retried', 'g', { leaseMs: 600_000 }));
        assert.ok(await store.retry(r!, 0, 'again'));
        const pairs = [...['due', 'sched', 'held', 'lapsed', 'retried', 'idle', 'unregistered'].map((topic) => ({ topic, group: 'g' })),
          ...Array.from({ length: fillers }, (_, i) => ({ topic: 'filler', group: `f${i}` }))];
        const names = async () => (await store.duePairs!(pairs)).map((p) => `${p.topic}/${p.group}`).sort();
        // The 1 ms lease runs out by the store's clock (ClickHouse's may lag ours a little).
        await waitFor(async () => (await names()).includes('lapsed/g'), 30_000, 'the lapsed lease');
        assert.deepEqual(await names(), ['due/g', 'lapsed/g', 'retried/g']);
        // Claimed, they are no longer due; a pair not asked about is never named.
        for (const t of ['due', 'lapsed', 'retried']) assert.equal((await store.claim(claimReq(t, 'g', { leaseMs: 600_000 }))).length, 1);
        assert.deepEqual(await names(), []);
        await store.append([msg('due')]);
        assert.deepEqual((await store.duePairs!(pairs.filter((p) => p.topic !== 'due'))).length, 0);
        assert.deepEqual(await names(), ['due/g']);
      });
    }

    it('40 idle subscriptions make no claims over many ticks: one poll query per tick for all of them', async () => {
      assert.equal(typeof (await t.h.open()).duePairs, 'function', 'the store implements duePairs');
      const a = await instance();
      const n = 40;
      await Promise.all(Array.from({ length: n }, (_, i) => a.q.subscribe(`t${i % 20}`, `g${i % 2}`, async () => undefined, POLL)));
      await waitFor(() => a.store.count('claim') >= n, 30_000, 'the first claim of every subscription');
      await ticks(a.store, 1);
      const claims = a.store.count('claim');
      const queries = a.store.count('duePairs');
      const polled = a.poller.ticks;
      await ticks(a.store, 8);
      assert.equal(a.store.count('claim'), claims, 'no claim while every subscription is idle');
      assert.equal(a.store.count('duePairs') - queries, a.poller.ticks - polled, 'one query per tick, not one per subscription');
      assert.equal(a.poller.size, n);
      assert.deepEqual(t.errors, []);
    });

    it('idle subscriptions arm no heartbeat each: it runs only while its subscription holds an attempt', async () => {
      // Live intervals, counted through the globals the engine calls (the heartbeat is one; a queue's janitor is another).
      const live = new Set<unknown>();
      const { setInterval: set0, clearInterval: clear0 } = globalThis;
      globalThis.setInterval = ((...args: Parameters<typeof setInterval>) => {
        const timer = set0(...args);
        live.add(timer);
        return timer;
      }) as typeof setInterval;
      globalThis.clearInterval = ((timer?: Parameters<typeof clearInterval>[0]) => {
        live.delete(timer);
        clear0(timer);
      }) as typeof clearInterval;
      try {
        const a = await instance();
        const b = await instance();
        const ran: string[] = [];
        const release = deferred();
        await a.q.subscribe('long', 'g', async (d) => {
          ran.push(dec(d.payload));
          if (ran.length === 1) await release.promise;
        }, { ...POLL, leaseDurationMs: ms(600) });
        await waitFor(() => a.store.count('claim') >= 1, 30_000, 'the first claim');
        await ticks(a.store, 1);
        const base = live.size;
        const n = 50;
        await Promise.all(Array.from({ length: n }, (_, i) => a.q.subscribe(`idle${i}`, 'g', async () => undefined, POLL)));
        await waitFor(() => a.store.count('claim') >= n + 1, 30_000, 'the first claim of every subscription');
        await ticks(a.store, 2);
        assert.equal(live.size, base, `${n} idle subscriptions armed ${live.size - base} intervals`);
        // Holding an attempt arms its subscription's heartbeat, which renews the lease past its length.
        await b.q.publish({ topic: 'long', payload: enc('first') });
        await waitFor(() => ran.length === 1, 30_000, 'the long handler');
        assert.equal(live.size, base + 1, 'one heartbeat while the attempt is held');
        await waitFor(() => a.store.count('extend') >= 3, 30_000, 'renewals of the held lease');
        release.resolve();
        await b.q.publish({ topic: 'long', payload: enc('second') });
        await waitFor(() => ran.length === 2, 30_000, 'the next delivery');
        await waitFor(() => live.size === base, 30_000, 'the heartbeat to stop with the last attempt');
        const renewals = a.store.count('extend');
        await ticks(a.store, 3);
        assert.equal(a.store.count('extend'), renewals, 'no renewal once nothing is held');
        assert.deepEqual(ran, ['first', 'second']);
        assert.deepEqual(t.errors, []);
      } finally {
        globalThis.setInterval = set0;
        globalThis.clearInterval = clear0;
      }
    });

    it('each tick asks about the pairs subscribed then: the same array while they stay, a new one when a pair comes or goes', async () => {
      const a = await instance();
      const b = await instance();
      const asked: Array<readonly ConsumerGroup[]> = [];
      a.store.before.duePairs = (pairs: readonly ConsumerGroup[]) => void asked.push(pairs);
      const names = (pairs: readonly ConsumerGroup[]) => pairs.map((p) => `${p.topic}/${p.group}`).sort();
      const got: string[] = [];
      const handler = async (d: { topic: string }) => void got.push(d.topic);
      const p1 = await a.q.subscribe('p1', 'g', handler, POLL);
      await a.q.subscribe('p2', 'g', handler, POLL);
      await ticks(a.store, 3);
      assert.deepEqual(names(asked.at(-1)!), ['p1/g', 'p2/g']);
      assert.equal(asked.at(-1), asked.at(-2), 'one array from tick to tick while the pairs stay');
      // A pair subscribed after the array was made is asked about from the next tick, and its work is found.
      await a.q.subscribe('p3', 'g', handler, POLL);
      await ticks(a.store, 2);
      assert.deepEqual(names(asked.at(-1)!), ['p1/g', 'p2/g', 'p3/g']);
      await b.q.publish({ topic: 'p3', payload: enc('x') });
      await waitFor(() => got.length === 1, 30_000, 'the delivery to the pair subscribed last');
      assert.deepEqual(got, ['p3']);
      // A pair whose last subscription closed is no longer asked about.
      await p1.close();
      await ticks(a.store, 2);
      assert.deepEqual(names(asked.at(-1)!), ['p2/g', 'p3/g']);
      assert.deepEqual(t.errors, []);
    });

    it('a message another instance publishes is found by the poll and claimed by its subscription only', async () => {
      const a = await instance();
      const b = await instance();
      const got: Array<[string, string]> = [];
      await Promise.all(Array.from({ length: 10 }, (_, i) =>
        a.q.subscribe(`t${i}`, 'g', async (d) => void got.push([d.topic, dec(d.payload)]), POLL)));
      await waitFor(() => a.store.count('claim') >= 10, 30_000, 'the first claims');
      await ticks(a.store, 1);
      const from = a.claimed.length;
      await b.q.publish({ topic: 't7', payload: enc('hello') });
      await waitFor(() => got.length === 1, 30_000, 'the delivery');
      assert.deepEqual(got, [['t7', 'hello']]);
      await ticks(a.store, 3);
      const after = a.claimed.slice(from);
      assert.ok(after.length >= 1, 'the subscription claimed');
      assert.deepEqual([...new Set(after)], ['t7'], `only t7's subscription claimed (${after.join(',')})`);
      assert.deepEqual(t.errors, []);
    });

    it('a scheduled message another instance published is delivered when due, without claims before', async () => {
      const a = await instance();
      const b = await instance();
      const got: number[] = [];
      await a.q.subscribe('t', 'g', async () => void got.push(Date.now()), POLL);
      await a.q.subscribe('other', 'g', async () => undefined, POLL);
      await waitFor(() => a.store.count('claim') >= 2, 30_000, 'the first claims');
      const from = a.claimed.length;
      const dueAt = Date.now() + 1000;
      await b.q.publish({ topic: 't', payload: enc('later'), deliverAt: new Date(dueAt) });
      await waitFor(() => got.length === 1, 30_000, 'the scheduled message');
      assert.ok(got[0]! >= dueAt, 'not before deliverAt');
      const claims = a.claimed.slice(from);
      // One claim when the poll found it due (two if a tick landed while it ran), not one per tick of the wait.
      assert.ok(claims.length <= 3 && claims.every((t) => t === 't'), `claims: ${claims.join(',')}`);
    });

    it('a lease another instance kept when it stopped is redelivered once it runs out, found by the poll', async () => {
      const a = await instance();
      const b = await instance();
      const started = deferred();
      await a.q.subscribe('t', 'g', async (_d, signal) => {
        started.resolve();
        await new Promise((resolve) => signal.addEventListener('abort', resolve));
      }, { ...POLL, leaseDurationMs: ms(400) });
      await b.q.publish({ topic: 't', payload: enc('x') });
      await started.promise;
      const attempts: number[] = [];
      await b.q.subscribe('t', 'g', async (d) => void attempts.push(d.attempt), POLL);
      await a.q.close({ timeoutMs: 10 }); // the handler is abandoned; its lease is kept and runs out
      await waitFor(() => attempts.length === 1, 30_000, 'the redelivery');
      assert.deepEqual(attempts, [2]);
    });

    it('subscribe, close and queue close racing a poll query in flight', async () => {
      const a = await instance();
      const b = await instance();
      const got: string[] = [];
      const subs: Subscription[] = await Promise.all(Array.from({ length: 6 }, (_, i) =>
        a.q.subscribe(`t${i}`, 'g', async (d) => void got.push(`${d.topic}:${dec(d.payload)}`), POLL)));
      await waitFor(() => a.store.count('claim') >= 6, 30_000, 'the first claims');
      // Hold the next poll query until the subscriptions have changed under it.
      const inQuery = deferred();
      const release = deferred();
      a.store.before.duePairs = async () => {
        inQuery.resolve();
        await release.promise;
      };
      await inQuery.promise;
      await b.q.publish({ topic: 't0', payload: enc('to-closed') }, { topic: 't1', payload: enc('to-open') });
      const [, , late] = await Promise.all([
        subs[0]!.close(),
        subs[2]!.close(),
        a.q.subscribe('tnew', 'g', async (d) => void got.push(`${d.topic}:${dec(d.payload)}`), POLL),
      ]);
      // After the new subscription's first claim: only a later poll finds it.
      await b.q.publish({ topic: 'tnew', payload: enc('to-new') });
      delete a.store.before.duePairs;
      release.resolve();
      await waitFor(() => got.length === 2, 30_000, 'the deliveries to open subscriptions');
      await ticks(a.store, 3);
      assert.deepEqual(got.sort(), ['t1:to-open', 'tnew:to-new']);
      assert.equal(a.poller.size, 5);
      // The queue closes while another query is held: close waits for it, then closes the store.
      const inQuery2 = deferred();
      const held = deferred();
      a.store.before.duePairs = async () => {
        inQuery2.resolve();
        await held.promise;
      };
      await inQuery2.promise;
      const closing = a.q.close();
      await sleep(20);
      held.resolve();
      await closing;
      assert.equal(a.poller.size, 0);
      assert.ok(late);
      assert.deepEqual(t.errors, []);
    });

    it('a store without duePairs keeps the old behaviour: each subscription claims once per tick', async () => {
      const { q, store } = await t.instance({}, ['duePairs']);
      const poller = DuePoller.of(store);
      const got: string[] = [];
      await q.subscribe('t', 'g', async (d) => void got.push(dec(d.payload)), POLL);
      await q.subscribe('u', 'g', async () => undefined, POLL);
      const from = poller.ticks;
      await waitFor(() => poller.ticks >= from + 3, 30_000, 'three ticks');
      assert.ok(store.count('claim') >= 2 + 2, 'the ticks woke the subscriptions, and they claimed');
      // Another instance's publish is found by those claims.
      const { q: other } = await t.instance();
      await other.publish({ topic: 't', payload: enc('found') });
      await waitFor(() => got.length === 1, 30_000, 'the delivery');
      assert.deepEqual(got, ['found']);
    });
  });
}
