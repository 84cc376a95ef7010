/**
 * Engine-level conformance of operating on groups and dead letters:
 * `removeGroup`, `listGroups` and `redrive`, over every store in
 * STORE_FACTORIES, including each run at once with the operations it meets.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ClosedError, InvalidArgumentError, InvalidNameError, UnsupportedError } from '../../src/errors.js';
import { createStoreQueue } from '../../src/queue/engine.js';
import { HEADER_DLQ_ERROR, HEADER_DLQ_GROUP, HEADER_DLQ_SOURCE_TOPIC } from '../../src/queue/dead-letter.js';
import { HEADER_REDRIVE_FROM, REDRIVE_PAGE, redriveId } from '../../src/queue/redrive.js';
import { permanent } from '../../src/queue/permanent.js';
import { MemoryStore } from '../../src/queue/stores/memory.js';
import type { Delivery, Message, RedriveOptions, Store } from '../../src/queue/types.js';
import { dec, enc, engineHarness, FAST } from './engine-harness.js';
import { QUEUE_FACTORIES, conformanceIt, keyed } from './factories.js';
import { claimReq, counts, deferred, sleep, waitFor } from './helpers.js';

/** A dead-letter copy as a subscription would publish it, from topic `source`. */
function copy(id: string, source: string | undefined, extra: Partial<Message> = {}): Message {
  const headers: Record<string, string> = { keep: 'me', [HEADER_DLQ_GROUP]: 'g', [HEADER_DLQ_ERROR]: 'boom' };
  if (source !== undefined) headers[HEADER_DLQ_SOURCE_TOPIC] = source;
  return { id, topic: 'dlq', payload: enc(`payload of ${id}`), headers, ...extra };
}

for (const factory of QUEUE_FACTORIES) {
  describe(`engine groups and dead letters: ${factory.name}`, { skip: factory.skip }, () => {
    const it = conformanceIt(factory, 'admin');
    const t = engineHarness(factory);

    it('removeGroup refuses while this queue has a subscription of the group, then removes it once closed', async () => {
      const { q } = await t.instance();
      const seen: string[] = [];
      const sub = await q.subscribe('t', 'g', async (d) => void seen.push(d.id), FAST);
      await q.subscribe('t', 'stays', async () => undefined, FAST);
      await q.publish({ id: 'a', topic: 't', payload: enc('a') });
      await waitFor(() => seen.length === 1);
      await assert.rejects(q.removeGroup('t', 'g'), InvalidArgumentError);
      assert.deepEqual(await q.listGroups('t'), [{ topic: 't', group: 'g' }, { topic: 't', group: 'stays' }]);
      await sub.close();
      await q.publish({ id: 'b', topic: 't', payload: enc('b') });
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 1, leased: 0, dead: 0 });
      assert.equal(await q.removeGroup('t', 'g'), true);
      assert.equal(await q.removeGroup('t', 'g'), false);
      assert.deepEqual(counts(await q.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
      assert.deepEqual(await q.listGroups(), [{ topic: 't', group: 'stays' }]);
      // Subscribing again registers it anew: latest, so 'a' and 'b' are not redelivered.
      const again: string[] = [];
      await q.subscribe('t', 'g', async (d) => void again.push(d.id), FAST);
      await q.publish({ id: 'c', topic: 't', payload: enc('c') });
      await waitFor(() => again.length === 1);
      await sleep(60);
      assert.deepEqual(again, ['c']);
    });

    it("another instance's running handler loses its lease when the group is removed; its ack changes nothing", async () => {
      const a = await t.instance();
      const b = await t.instance();
      const started = deferred();
      let aborted = false;
      const sub = await a.q.subscribe('t', 'g', async (_d, signal) => {
        started.resolve();
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
        aborted = true;
      }, { ...FAST, leaseDurationMs: t.ms(300) });
      await a.q.publish({ topic: 't', payload: enc('x') });
      await started.promise;
      assert.equal(await b.q.removeGroup('t', 'g'), true);
      await waitFor(() => aborted, 3000, 'the heartbeat to see the lease gone');
      await sub.close();
      if (a.store) assert.equal(a.store.count('ack'), 0, 'an aborted handler writes no ack');
      assert.deepEqual(counts(await b.q.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
      assert.deepEqual(await b.q.listGroups(), []);
    });

    it('subscribe and removeGroup of one group at once, in one queue: never a subscription on a removed group', async () => {
      const { q } = await t.instance();
      for (let i = 0; i < 5; i++) {
        const [subR, remR] = await Promise.allSettled([
          q.subscribe('t', 'g', async () => undefined, FAST),
          q.removeGroup('t', 'g'),
        ]);
        assert.equal(subR.status, 'fulfilled');
        // Called in this order, the subscription registers first and the removal is refused.
        assert.equal(remR.status, 'rejected');
        assert.ok((remR as PromiseRejectedResult).reason instanceof InvalidArgumentError);
        assert.deepEqual(await q.listGroups('t'), [{ topic: 't', group: 'g' }]);
        await (subR as PromiseFulfilledResult<{ close(): Promise<void> }>).value.close();
        const rem2P = q.removeGroup('t', 'g');
        const sub2 = q.subscribe('t', 'g', async () => undefined, FAST);
        const [rem2] = await Promise.allSettled([rem2P, sub2]);
        // Removal first (nothing subscribed yet), then the subscription registers the group anew.
        assert.equal(rem2.status, 'fulfilled');
        assert.deepEqual(await q.listGroups('t'), [{ topic: 't', group: 'g' }]);
        await (await sub2).close();
        assert.equal(await q.removeGroup('t', 'g'), true);
      }
    });

    it('removeGroup at once with publishes and with a subscription of another instance acking: nothing of the group survives', async () => {
      const a = await t.instance();
      const b = await t.instance();
      let handled = 0;
      const sub = await a.q.subscribe('t', 'g', async () => void handled++, { ...FAST, concurrency: 4 });
      await b.q.subscribe('t', 'keep', async () => undefined, FAST);
      const publishes = Array.from({ length: 10 }, (_, i) => b.q.publish(...Array.from({ length: 10 }, (_, j) => ({ topic: 't', id: `m${i}-${j}`, payload: enc('x') }))));
      await waitFor(() => handled > 0);
      const [removed] = await Promise.all([b.q.removeGroup('t', 'g'), ...publishes]);
      assert.equal(removed, true);
      await sub.close();
      await b.q.publish({ topic: 't', id: 'after', payload: enc('x') });
      await waitFor(async () => (await b.q.stats('t', 'keep')).pending === 0);
      assert.deepEqual(counts(await b.q.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
      assert.deepEqual(await b.q.listGroups(), [{ topic: 't', group: 'keep' }]);
    });

    it('redrive republishes real dead letters to their source topic under derived IDs, once however often it runs', async () => {
      const { q } = await t.instance();
      let fail = true;
      const got: Delivery[] = [];
      await q.subscribe('orders', 'billing', async (d) => {
        if (fail) throw permanent(new Error(`no ${dec(d.payload)}`));
        got.push(d);
      }, { ...FAST, deadLetterTopic: 'orders.dead' });
      await q.publish(
        { id: 'o1', topic: 'orders', ...keyed(factory, 'c-1'), payload: enc('one'), headers: { trace: 't1' } },
        { id: 'o2', topic: 'orders', payload: enc('two') },
      );
      await waitFor(async () => (await q.stats('orders', 'billing')).dead === 2);
      fail = false;
      const r1 = await q.redrive('orders.dead');
      assert.equal(r1.skipped, 0);
      assert.equal(r1.ids.length, 2);
      await waitFor(() => got.length === 2);
      const byPayload = new Map(got.map((d) => [dec(d.payload), d]));
      const one = byPayload.get('one')!;
      assert.equal(one.topic, 'orders');
      assert.equal(one.key, keyed(factory, 'c-1').key);
      // The copy of o1's dead delivery has the delivery's ID; the redriven message's ID derives from it.
      const copyId = one.headers![HEADER_REDRIVE_FROM]!;
      assert.equal(one.id, redriveId(copyId));
      assert.deepEqual(one.headers, { trace: 't1', [HEADER_REDRIVE_FROM]: copyId }, 'x-queue-dlq-* headers are dropped');
      assert.deepEqual(r1.ids.slice().sort(), got.map((d) => d.id).sort());
      assert.equal(byPayload.get('two')!.key, undefined);

      const r2 = await q.redrive('orders.dead');
      assert.deepEqual(r2, r1, 'the same copies map to the same IDs');
      await sleep(100);
      assert.equal(got.length, 2, 'publishing an existing ID stored nothing');
      assert.deepEqual(counts(await q.stats('orders', 'billing')), { pending: 0, leased: 0, dead: 2 });
    });

    it('redrive skips and counts copies it cannot republish; limit and filter choose among the rest', async () => {
      const { q, store } = await t.instance({ maxPayloadBytes: 64 });
      await q.publish(
        copy('c1', 'src'),
        copy('no-source', undefined),
        copy('c2', 'src'),
        copy('loop', 'dlq'),
        copy('bad-name', 'has space'),
        copy('c3', 'src', { key: 'k' }),
        copy('c4', 'src'),
      );
      // A copy too large for this queue (published through another with a larger limit).
      const big = await t.instance();
      await big.q.publish(copy('huge', 'src', { payload: new Uint8Array(100) }));
      const seen: string[] = [];
      const filter = (c: { id: string }) => {
        seen.push(c.id);
        return c.id !== 'c2';
      };
      const r = await q.redrive('dlq', { filter, limit: 2 });
      assert.deepEqual([r.ids, r.skipped], [[redriveId('c1'), redriveId('c3')], 3]);
      assert.deepEqual(seen, ['c1', 'c2', 'c3'], 'filter sees usable copies only, in publish order, until the limit');
      assert.equal(typeof r.next, 'string', 'stopped at its limit: a cursor to go on from');
      // Going on from r.next reads the copies after c3 only; the run reads to the end, so no cursor.
      const more = await q.redrive('dlq', { filter, limit: 2, after: r.next! });
      assert.deepEqual(more, { ids: [redriveId('c4')], skipped: 1 });
      assert.deepEqual(seen, ['c1', 'c2', 'c3', 'c4']);
      const rest = await q.redrive('dlq', { filter: async (c) => c.id !== 'c2' });
      assert.deepEqual(rest, { ids: [redriveId('c1'), redriveId('c3'), redriveId('c4')], skipped: 4 });
      const msgs = await store.inner.listMessages!('src', { limit: 10 });
      assert.deepEqual(msgs.messages.map((m) => m.id), [redriveId('c1'), redriveId('c3'), redriveId('c4')]);
      assert.equal(msgs.messages[1]!.key, 'k');
      assert.deepEqual(msgs.messages[0]!.headers, { keep: 'me', [HEADER_REDRIVE_FROM]: 'c1' });
      assert.equal(dec(msgs.messages[2]!.payload), 'payload of c4');
      assert.deepEqual(await q.redrive('empty-topic'), { ids: [], skipped: 0 });
    });

    it(`redrive pages through more than ${REDRIVE_PAGE} copies in publish order`, async () => {
      const { q, store } = await t.instance();
      const n = REDRIVE_PAGE * 2 + 7;
      const copies = Array.from({ length: n }, (_, i) => copy(`c${String(i).padStart(4, '0')}`, 'src'));
      for (let i = 0; i < n; i += 100) await q.publish(...copies.slice(i, i + 100));
      const r = await q.redrive('dlq');
      assert.deepEqual(r.ids, copies.map((c) => redriveId(c.id!)));
      assert.equal(store.count('listMessages'), 3);
      const limited = await q.redrive('dlq', { limit: REDRIVE_PAGE + 1 });
      assert.deepEqual(limited.ids, copies.slice(0, REDRIVE_PAGE + 1).map((c) => redriveId(c.id!)));
      // Runs of a limit, each going on from the last one's cursor, read every copy once, in order.
      const runs: string[][] = [];
      let after = limited.next;
      while (after !== undefined) {
        const run = await q.redrive('dlq', { limit: 100, after });
        runs.push(run.ids);
        after = run.next;
      }
      assert.deepEqual(runs.map((ids) => ids.length), [100, 100, 62]);
      assert.deepEqual([...limited.ids, ...runs.flat()], copies.map((c) => redriveId(c.id!)));
    });

    it('two redrives at once republish each copy once', async () => {
      const a = await t.instance();
      const b = await t.instance();
      let handled = 0;
      await a.q.subscribe('src', 'g', async () => void handled++, FAST);
      await a.q.publish(...Array.from({ length: 40 }, (_, i) => copy(`c${i}`, 'src')));
      const [r1, r2, r3] = await Promise.all([a.q.redrive('dlq'), b.q.redrive('dlq'), a.q.redrive('dlq')]);
      assert.deepEqual(r1.ids, r2.ids);
      assert.deepEqual(r1.ids, r3.ids);
      assert.equal(new Set(r1.ids).size, 40);
      await waitFor(() => handled >= 40);
      // The acks are written after the handlers return (in batches, and
      // slowly on a busy ClickHouse): wait for them to land, not a fixed time.
      await waitFor(async () => (await a.q.stats('src', 'g')).leased === 0, 5000, 'the acks to land');
      assert.equal(handled, 40);
      assert.deepEqual(counts(await a.q.stats('src', 'g')), { pending: 0, leased: 0, dead: 0 });
    });

    it('a redrive at once with publishes to the dead-letter topic: each copy republished once, the late ones by the next run', async () => {
      const a = await t.instance();
      const b = await t.instance();
      await a.q.publish(...Array.from({ length: 30 }, (_, i) => copy(`old${i}`, 'src')));
      const [r] = await Promise.all([
        a.q.redrive('dlq'),
        ...Array.from({ length: 10 }, (_, i) => b.q.publish(copy(`new${i}`, 'src'))),
      ]);
      const old = Array.from({ length: 30 }, (_, i) => redriveId(`old${i}`));
      assert.deepEqual(r.ids.slice(0, 30), old, 'every copy stored before the redrive, in order');
      assert.equal(new Set(r.ids).size, r.ids.length);
      const next = await a.q.redrive('dlq');
      assert.equal(next.ids.length, 40);
      const src = await a.store.inner.listMessages!('src', { limit: 100 });
      assert.equal(src.messages.length, 40, 'no copy was republished twice');
      assert.deepEqual(new Set(src.messages.map((m) => m.id)), new Set(next.ids));
    });

    it('redrive: a filter that throws rejects with its error after republishing what it had accepted', async () => {
      const { q, store } = await t.instance();
      await q.publish(copy('c1', 'src'), copy('c2', 'src'), copy('c3', 'src'));
      const oops = new Error('filter broke');
      await assert.rejects(q.redrive('dlq', { filter: (c) => { if (c.id === 'c3') throw oops; return true; } }), (e) => e === oops);
      assert.deepEqual((await store.inner.listMessages!('src', { limit: 10 })).messages.map((m) => m.id), [redriveId('c1'), redriveId('c2')]);
    });

    it('listMessages pages through a topic oldest first, changing nothing; bad options and cursors are refused', async () => {
      const { q } = await t.instance();
      const ids = Array.from({ length: 7 }, (_, i) => `m${i}`);
      await q.publish(...ids.map((id) => copy(id, 'src')));
      const seen: string[] = [];
      let after: string | undefined;
      let pages = 0;
      do {
        const page = await q.listMessages('dlq', after === undefined ? { limit: 3 } : { after, limit: 3 });
        assert.ok(page.messages.length <= 3);
        seen.push(...page.messages.map((m) => m.id));
        after = page.next;
        pages++;
      } while (after !== undefined && pages < 10);
      assert.deepEqual(seen, ids);
      assert.equal(pages, 3);
      const first = (await q.listMessages('dlq', { limit: 1 })).messages[0]!;
      assert.equal(dec(first.payload), 'payload of m0');
      assert.equal(first.headers?.[HEADER_DLQ_SOURCE_TOPIC], 'src');
      assert.deepEqual(await q.listMessages('empty'), { messages: [] });
      // Reading consumed nothing: a redrive still finds every copy.
      assert.equal((await q.redrive('dlq')).ids.length, 7);
      const bad: unknown[] = [{ limit: 0 }, { limit: 1001 }, { limit: 2.5 }, { after: 3 }, { after: '' }, { after: 'x1' }, { after: '-1' }, { page: 1 }, null];
      for (const opts of bad) await assert.rejects(q.listMessages('dlq', opts as never), InvalidArgumentError, JSON.stringify(opts));
      await assert.rejects(q.listMessages('bad topic'), InvalidNameError);
    });

    it('listMessages at once with publishes to the topic: every page is in publish order and a final walk sees every message once', async () => {
      const { q } = await t.instance();
      const walk = async () => {
        const out: string[] = [];
        let after: string | undefined;
        do {
          const page = await q.listMessages('dlq', after === undefined ? { limit: 4 } : { after, limit: 4 });
          out.push(...page.messages.map((m) => m.id));
          after = page.next;
        } while (after !== undefined);
        return out;
      };
      const publishes = Array.from({ length: 20 }, (_, i) => q.publish(copy(`p${String(i).padStart(2, '0')}`, 'src')));
      const [during] = await Promise.all([walk(), ...publishes]);
      assert.equal(new Set(during).size, during.length, 'no message twice in one walk');
      const all = await walk();
      assert.equal(all.length, 20);
      assert.deepEqual([...all].sort(), all.slice().sort());
    });

    it('names and options are checked; a closed queue refuses', async () => {
      const { q } = await t.instance();
      await assert.rejects(q.removeGroup('bad topic', 'g'), InvalidNameError);
      await assert.rejects(q.removeGroup('t', ''), InvalidNameError);
      await assert.rejects(q.listGroups('x'.repeat(201)), InvalidNameError);
      await assert.rejects(q.redrive('dlq:1'), InvalidNameError);
      const bad: unknown[] = [{ limit: 0 }, { limit: 1.5 }, { limit: '3' }, { limit: -1 }, { limit: Infinity }, { filter: 'yes' }, { after: '' }, { after: 5 }, { max: 3 }, null, 'all', []];
      for (const opts of bad) await assert.rejects(q.redrive('dlq', opts as RedriveOptions), InvalidArgumentError, JSON.stringify(opts));
      assert.deepEqual(await q.redrive('dlq', {}), { ids: [], skipped: 0 });
      await q.close();
      await assert.rejects(q.removeGroup('t', 'g'), ClosedError);
      await assert.rejects(q.listGroups(), ClosedError);
      await assert.rejects(q.redrive('dlq'), ClosedError);
      await assert.rejects(q.listMessages('dlq'), ClosedError);
    });
  });
}

describe('engine groups and dead letters: a store without the optional methods', () => {
  it('removeGroup, listGroups and redrive reject with UnsupportedError; the rest works', async () => {
    const inner = new MemoryStore();
    const bare: Store = {
      ensureGroup: (t, g, s) => inner.ensureGroup(t, g, s),
      append: (m) => inner.append(m),
      claim: (r) => inner.claim(r),
      ack: (c) => inner.ack(c),
      retry: (c, ms, e) => inner.retry(c, ms, e),
      kill: (c, e, o) => inner.kill(c, e, o),
      extend: (c, ms) => inner.extend(c, ms),
      release: (c) => inner.release(c),
      purge: (p, n) => inner.purge(p, n),
      stats: (t, g) => inner.stats(t, g),
      ping: () => inner.ping(),
      close: () => inner.close(),
    };
    const q = createStoreQueue(bare);
    try {
      await assert.rejects(q.removeGroup('t', 'g'), UnsupportedError);
      await assert.rejects(q.listGroups(), UnsupportedError);
      await assert.rejects(q.redrive('dlq'), UnsupportedError);
      await assert.rejects(q.listMessages('dlq'), UnsupportedError);
      await q.publish({ topic: 't', payload: enc('x') });
      await inner.ensureGroup('t', 'g', 'earliest');
      assert.equal((await inner.claim(claimReq('t', 'g'))).length, 1);
    } finally {
      await q.close();
    }
  });
});
