/**
 * Engine-level conformance of flow control: `pauseGroup` / `resumeGroup`,
 * message priorities and the `rateLimit` subscribe option, through `Queue`
 * on every store that has each (flow-stores.ts says which skip); the errors
 * a queue gives when its store lacks one, or for a bad value, on every store.
 * engine-flow-concurrency.test.ts runs the new calls at once with the others.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { InvalidArgumentError, InvalidNameError, UnsupportedError } from '../../src/errors.js';
import { MAX_PRIORITY, MIN_PRIORITY } from '../../src/queue/types.js';
import type { Message } from '../../src/queue/types.js';
import { enc, engineHarness, FAST, polls } from './engine-harness.js';
import { FLOW_FACTORIES } from './flow-stores.js';
import { counts, deferred, HOUR_POLL, InstrumentedStore, orHang, sleep, waitFor } from './helpers.js';

const HOUR = 3_600_000;

const m = (id: string, extra: Partial<Message> = {}): Message => ({ id, topic: 't', payload: enc(id), ...extra });

/** Logs each claim of `store`: local time before it was sent and after it came back, and how many it leased. */
function logClaims(store: InstrumentedStore, log: Array<{ sent: number; back: number; n: number }>): void {
  const sent: number[] = [];
  store.before.claim = () => void sent.push(Date.now());
  store.after.claim = (r: unknown[]) => {
    log.push({ sent: sent.shift()!, back: Date.now(), n: r.length });
    return r;
  };
}

for (const { factory, pause, priority, rateLimit, rateWait } of FLOW_FACTORIES) {
  describe(`engine flow control: ${factory.name}`, { skip: factory.skip }, () => {
    const t = engineHarness(factory);

    it('without the store methods: pause, resume, a non-zero priority and rateLimit throw UnsupportedError; the rest works', async () => {
      const { q } = await t.instance({}, ['setGroupPaused', 'capabilities']);
      const seen: string[] = [];
      await q.subscribe('t', 'g', async (d) => void seen.push(d.id), FAST);
      await assert.rejects(q.pauseGroup('t', 'g'), UnsupportedError);
      await assert.rejects(q.resumeGroup('t', 'g'), UnsupportedError);
      await assert.rejects(q.publish(m('high', { priority: 1 })), UnsupportedError);
      await assert.rejects(q.publish(m('ok'), m('low', { priority: -1 })), UnsupportedError, 'the whole publish is refused');
      await assert.rejects(q.subscribe('t', 'h', async () => undefined, { rateLimit: { max: 1, intervalMs: 1000 } }), UnsupportedError);
      await q.publish(m('zero', { priority: 0 }), m('plain'));
      await waitFor(() => seen.length === 2);
      assert.deepEqual(seen.sort(), ['plain', 'zero']);
      const stats = await q.stats('t', 'g');
      assert.equal(stats.paused, false);
    });

    it('bad values: InvalidArgumentError for a priority or rateLimit out of range, InvalidNameError for bad names', async () => {
      const { q } = await t.instance();
      for (const p of [1.5, MAX_PRIORITY + 1, MIN_PRIORITY - 1, Number.NaN, Infinity, '3' as unknown as number]) {
        await assert.rejects(q.publish(m('x', { priority: p })), InvalidArgumentError, String(p));
      }
      const bad = [null, 5, [], { max: 0, intervalMs: 1000 }, { max: 1.5, intervalMs: 1000 }, { max: 1, intervalMs: 0 }, { max: 1 }, { max: 1, intervalMs: 2 ** 31 }, { max: 1, intervalMs: 10, burst: 2 }];
      for (const r of bad) {
        await assert.rejects(q.subscribe('t', 'g', async () => undefined, { rateLimit: r as never }), InvalidArgumentError, JSON.stringify(r));
      }
      // The store counts claims as starts: claims held for a slot would start later, in a burst.
      await assert.rejects(q.subscribe('t', 'g', async () => undefined, { rateLimit: { max: 5, intervalMs: 1000 }, prefetch: 5 }), /cannot be combined with prefetch/);
      await assert.rejects(q.pauseGroup('t', 'bad name'), InvalidNameError);
      await assert.rejects(q.resumeGroup('', 'g'), InvalidNameError);
      assert.deepEqual(await q.listGroups(), [], 'nothing was registered');
    });

    it('pauseGroup stops every instance claiming; running handlers finish; publishing goes on; resumeGroup hands out the backlog', { skip: pause }, async () => {
      const a = await t.instance();
      const b = await t.instance();
      const seen: string[] = [];
      const started = deferred();
      const finish = deferred();
      const handler = async (d: { id: string }) => {
        seen.push(d.id);
        if (d.id === 'first') {
          started.resolve();
          await finish.promise;
        }
      };
      await a.q.subscribe('t', 'g', handler, FAST);
      await b.q.subscribe('t', 'g', handler, FAST);
      await a.q.publish(m('first'));
      await orHang(started.promise, 'the first delivery');
      assert.equal(await b.q.pauseGroup('t', 'g'), true);
      assert.equal((await a.q.stats('t', 'g')).paused, true);
      await a.q.publish(m('a1'), m('a2'));
      await b.q.publish(m('b1'), m('b2'));
      finish.resolve();
      await waitFor(async () => (await a.q.stats('t', 'g')).leased === 0, 5000, 'the running handler to finish and be acked');
      await Promise.all([polls(a.store), polls(b.store)]);
      assert.deepEqual(seen, ['first'], 'nothing claimed while paused');
      assert.deepEqual(counts(await b.q.stats('t', 'g')), { pending: 4, leased: 0, dead: 0 });

      assert.equal(await a.q.resumeGroup('t', 'g'), true);
      await waitFor(() => seen.length === 5, 5000, 'the backlog');
      assert.deepEqual(seen.slice(1).sort(), ['a1', 'a2', 'b1', 'b2']);
      assert.equal((await b.q.stats('t', 'g')).paused, false);
    });

    it('resumeGroup wakes this queue’s subscriptions of the group at once, not at their next poll', { skip: pause }, async () => {
      const { q } = await t.instance();
      const seen: string[] = [];
      await q.subscribe('t', 'g', async (d) => void seen.push(d.id), { ...FAST, pollIntervalMs: HOUR_POLL });
      assert.equal(await q.pauseGroup('t', 'g'), true);
      await q.publish(m('a')); // wakes the subscription, whose claim finds the group paused
      await sleep(50);
      assert.deepEqual(seen, []);
      assert.equal(await q.resumeGroup('t', 'g'), true);
      await waitFor(() => seen.length === 1, 5000, 'the wake-up of resume');
      assert.deepEqual(seen, ['a']);
    });

    it('pauseGroup and resumeGroup of a group never registered resolve false and register nothing', { skip: pause }, async () => {
      const { q } = await t.instance();
      assert.equal(await q.pauseGroup('t', 'nobody'), false);
      assert.equal(await q.resumeGroup('t', 'nobody'), false);
      assert.deepEqual(await q.listGroups(), []);
      assert.equal((await q.stats('t', 'nobody')).paused, false);
    });

    it('priorities reach a handler of concurrency 1 highest first, equal ones in publish order', { skip: priority }, async () => {
      const { q } = await t.instance();
      const published: Array<[string, number]> = [['a', 0], ['b', 3], ['c', -2], ['d', 3], ['e', MAX_PRIORITY], ['f', 0], ['g', MIN_PRIORITY], ['h', 7]];
      await q.publish(...published.map(([id, p]) => m(id, { priority: p })));
      const seen: Array<[string, number | undefined]> = [];
      await q.subscribe('t', 'g', async (d) => void seen.push([d.id, d.priority]), { ...FAST, concurrency: 1, startFrom: 'earliest' });
      await waitFor(() => seen.length === published.length, 5000, 'every message');
      assert.deepEqual(seen.map(([id]) => id), ['e', 'h', 'b', 'd', 'a', 'f', 'c', 'g']);
      // A handler sees the message's priority; none when it is 0.
      const byId = new Map(published);
      for (const [id, p] of seen) assert.equal(p, byId.get(id) === 0 ? undefined : byId.get(id), id);
    });

    it('a keyed lane keeps its order whatever the priorities of its messages', { skip: priority }, async () => {
      const { q } = await t.instance();
      await q.publish(m('k1', { key: 'k', priority: -5 }), m('u1', { priority: 2 }), m('k2', { key: 'k', priority: 9 }), m('k3', { key: 'k' }));
      const seen: string[] = [];
      await q.subscribe('t', 'g', async (d) => void seen.push(d.id), { ...FAST, concurrency: 4, startFrom: 'earliest' });
      await waitFor(() => seen.length === 4);
      assert.deepEqual(seen.filter((id) => id.startsWith('k')), ['k1', 'k2', 'k3']);
    });

    it('rateLimit: over any window at most max start, across instances, and every message is handled', { skip: rateLimit }, async () => {
      const limit = { max: 3, intervalMs: t.ms(300) };
      const log: Array<{ sent: number; back: number; n: number }> = [];
      const a = await t.instance();
      const b = await t.instance();
      logClaims(a.store, log);
      logClaims(b.store, log);
      const seen: string[] = [];
      for (const x of [a, b]) await x.q.subscribe('t', 'g', async (d) => void seen.push(d.id), { ...FAST, rateLimit: limit });
      const ids = Array.from({ length: 12 }, (_, i) => `m${i}`);
      await a.q.publish(...ids.map((id) => m(id)));
      await waitFor(() => seen.length === ids.length, 5000, 'every message');
      assert.deepEqual([...seen].sort(), [...ids].sort());
      log.sort((x, y) => x.sent - y.sent);
      for (const [i, c] of log.entries()) {
        // Claims surely started within one window of this one: sent after it, back within the interval (5 ms for clock granularity).
        const sure = log.slice(i).filter((d) => d.sent >= c.sent && d.back - c.sent < limit.intervalMs - 5).reduce((s, d) => s + d.n, 0);
        assert.ok(sure <= limit.max, `${sure} starts within one window`);
      }
    });

    it('rateLimit with an hour window: max start in all, however many instances, and no more', { skip: rateLimit }, async () => {
      const instances = [await t.instance(), await t.instance()];
      const seen: string[] = [];
      for (const x of instances) await x.q.subscribe('t', 'g', async (d) => void seen.push(d.id), { ...FAST, rateLimit: { max: 4, intervalMs: HOUR } });
      await instances[0]!.q.publish(...Array.from({ length: 10 }, (_, i) => m(`m${i}`)));
      await waitFor(() => seen.length === 4);
      await Promise.all(instances.map((x) => polls(x.store)));
      assert.equal(seen.length, 4);
      assert.deepEqual(counts(await instances[1]!.q.stats('t', 'g')), { pending: 6, leased: 0, dead: 0 });
    });

    it('a rate-limited subscription claims again when the window has room, not at its next poll, and wake-ups meanwhile cost no claim', { skip: rateWait }, async () => {
      const { q, store } = await t.instance();
      const seen: string[] = [];
      const limit = { max: 2, intervalMs: t.ms(300) };
      await q.subscribe('t', 'g', async (d) => void seen.push(d.id), { ...FAST, pollIntervalMs: HOUR_POLL, rateLimit: limit });
      await q.publish(...['a', 'b', 'c', 'd', 'e'].map((id) => m(id)));
      await waitFor(() => seen.length === 5, 5000, 'every window in turn');

      // An hour's window: once it is full, publishes wake the subscription but it makes no claim.
      const { q: q2, store: store2 } = await t.instance();
      const seen2: string[] = [];
      await q2.subscribe('t2', 'g', async (d) => void seen2.push(d.id), { ...FAST, pollIntervalMs: HOUR_POLL, rateLimit: { max: 1, intervalMs: HOUR } });
      await q2.publish(m('x', { topic: 't2' }), m('y', { topic: 't2' }));
      await waitFor(() => seen2.length === 1);
      await waitFor(() => store2.count('claim') >= 1);
      await sleep(50);
      const before = store2.count('claim');
      for (let i = 0; i < 5; i++) {
        await q2.publish(m(`z${i}`, { topic: 't2' }));
        await sleep(10);
      }
      await sleep(50);
      assert.equal(store2.count('claim'), before, 'no claim before the window has room');
      assert.deepEqual(seen2, ['x']);
      assert.ok(store.count('claim') < 20, `a claim per window, not a busy loop (${store.count('claim')} claims)`);
    });
  });
}
