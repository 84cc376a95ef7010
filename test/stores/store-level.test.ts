/**
 * Store-level conformance: what every store must do on its own (a delivery
 * per group, idempotent appends, claims and leases, retry and kill, key lanes,
 * caps, scheduled delivery, purge), each case run against every store in
 * STORE_FACTORIES through the Store SPI alone.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { deliveryId } from '../../src/queue/delivery-id.js';
import { MAX_ID_LENGTH, MAX_NAME_LENGTH } from '../../src/queue/names.js';
import type { Claimed, Store, StoredMessage } from '../../src/queue/types.js';
import { STORE_FACTORIES } from './factories.js';
import type { StoreHarness } from './factories.js';
import { claimReq, ids, msg, sleep, counts } from './helpers.js';

for (const factory of STORE_FACTORIES) {
  describe(`store level: ${factory.name}`, { skip: factory.skip }, () => {
    let h: StoreHarness;
    let s: Store;
    beforeEach(async () => {
      h = await factory.create();
      s = await h.open();
    });
    afterEach(() => h.cleanup());

    it('1. gives every group its own delivery; a leased delivery is not claimed twice', async () => {
      await s.ensureGroup('t', 'g1', 'latest');
      await s.ensureGroup('t', 'g2', 'latest');
      const ms = [msg('t'), msg('t'), msg('t')];
      await s.append(ms);
      const a = await s.claim(claimReq('t', 'g1'));
      const b = await s.claim(claimReq('t', 'g2'));
      assert.deepEqual(ids(a), ms.map((m) => m.id));
      assert.deepEqual(ids(b), ms.map((m) => m.id));
      assert.deepEqual(a.map((c) => c.deliveryId), ms.map((m) => deliveryId(m.id, 'g1')));
      assert.deepEqual(b.map((c) => c.deliveryId), ms.map((m) => deliveryId(m.id, 'g2')));
      assert.deepEqual(a.map((c) => [c.attempt, c.group]), [[1, 'g1'], [1, 'g1'], [1, 'g1']]);
      assert.equal(new Set([...a, ...b].map((c) => c.claimToken)).size, 6);
      assert.deepEqual(await s.claim(claimReq('t', 'g1')), []);
      assert.deepEqual(counts(await s.stats('t', 'g1')), { pending: 0, leased: 3, dead: 0 });
      assert.deepEqual(counts(await s.stats('t', 'nobody')), { pending: 0, leased: 0, dead: 0 });
    });

    it('2. latest skips the past, earliest backfills in publish order, re-registering never backfills', async () => {
      const before = Array.from({ length: 5 }, (_, i) => msg('t', { id: `old-${i}` }));
      await s.append(before);
      await s.ensureGroup('t', 'late', 'latest');
      await s.ensureGroup('t', 'early', 'earliest');
      assert.deepEqual(await s.claim(claimReq('t', 'late')), []);
      const early = await s.claim(claimReq('t', 'early'));
      assert.deepEqual(ids(early), ['old-0', 'old-1', 'old-2', 'old-3', 'old-4']);
      const after = msg('t', { id: 'new' });
      await s.append([after]);
      assert.deepEqual(ids(await s.claim(claimReq('t', 'late'))), ['new']);
      assert.deepEqual(ids(await s.claim(claimReq('t', 'early'))), ['new']);
      assert.deepEqual(await s.ack(early), early.map((c) => c.deliveryId));
      await s.ensureGroup('t', 'early', 'earliest');
      await s.ensureGroup('t', 'late', 'earliest');
      assert.deepEqual(await s.claim(claimReq('t', 'early')), []);
      assert.deepEqual(await s.claim(claimReq('t', 'late')), []);
      assert.deepEqual(counts(await s.stats('t', 'early')), { pending: 0, leased: 1, dead: 0 });
      assert.deepEqual(counts(await s.stats('t', 'late')), { pending: 0, leased: 1, dead: 0 });
    });

    it('3. appends are idempotent by message ID: twice in a batch, after an ack, while leased', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      const a = msg('t', { id: 'a' });
      await s.append([a, { ...a }]);
      await s.append([a]);
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 1, leased: 0, dead: 0 });
      const [c] = await s.claim(claimReq('t', 'g'));
      assert.equal(c!.message.id, 'a');
      assert.deepEqual(await s.ack([c!]), [c!.deliveryId]);
      await s.append([a]);
      assert.deepEqual(await s.claim(claimReq('t', 'g')), []);
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });

      const b = msg('t', { id: 'b' });
      await s.append([b]);
      const [cb] = await s.claim(claimReq('t', 'g'));
      await s.append([b]);
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 0, leased: 1, dead: 0 });
      assert.deepEqual(await s.claim(claimReq('t', 'g')), []);
      assert.deepEqual(await s.extend([cb!], 60_000), [cb!.deliveryId]);
    });

    it('4. racing claimers over 120 messages claim every delivery exactly once', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      const ms = Array.from({ length: 120 }, (_, i) => msg('t', { id: `m${i}` }));
      await s.append(ms);
      const stores = [s, await h.open(), await h.open(), await h.open()];
      const seen: string[] = [];
      await Promise.all(
        stores.map(async (st, i) => {
          for (;;) {
            const got = await st.claim(claimReq('t', 'g', { max: 7, runnerId: `r${i}` }));
            if (got.length === 0) return;
            seen.push(...ids(got));
            await sleep(0);
          }
        }),
      );
      assert.equal(seen.length, 120);
      assert.equal(new Set(seen).size, 120);
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 0, leased: 120, dead: 0 });
    });

    it('5. an expired lease is claimable again; the old token changes nothing', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      await s.append([msg('t', { id: 'x' })]);
      const [old] = await s.claim(claimReq('t', 'g', { leaseMs: 300 }));
      assert.equal(old!.attempt, 1);
      assert.deepEqual(await s.claim(claimReq('t', 'g')), []);
      await sleep(400);
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 1, leased: 0, dead: 0 });
      const [cur] = await s.claim(claimReq('t', 'g'));
      assert.equal(cur!.deliveryId, old!.deliveryId);
      assert.equal(cur!.attempt, 2);
      assert.notEqual(cur!.claimToken, old!.claimToken);
      assert.deepEqual(await s.ack([old!]), []);
      assert.equal(await s.retry(old!, 0, 'stale'), false);
      assert.equal(await s.kill(old!, 'stale'), false);
      assert.deepEqual(await s.extend([old!], 60_000), []);
      await s.release([old!]);
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 0, leased: 1, dead: 0 });
      assert.deepEqual(await s.claim(claimReq('t', 'g')), []);
      assert.deepEqual(await s.ack([cur!]), [cur!.deliveryId]);
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
    });

    it('5b. a delivery whose lease expired is claimed alone and marked recovered; a claim stops before one', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      await s.append([msg('t', { id: 'a' }), msg('t', { id: 'b' }), msg('t', { id: 'c' })]);
      const first = await s.claim(claimReq('t', 'g', { leaseMs: 300 }));
      assert.deepEqual(ids(first), ['a', 'b', 'c']);
      assert.deepEqual(first.map((c) => c.recovered), [undefined, undefined, undefined]);
      // b finishes; a and c are left to expire, as a crashed holder leaves them.
      await s.ack([first[1]!]);
      await sleep(400);
      const one = await s.claim(claimReq('t', 'g'));
      assert.deepEqual(ids(one), ['a'], 'the first due delivery came back from an expired lease: alone');
      assert.equal(one[0]!.recovered, true);
      assert.equal(one[0]!.attempt, 2);
      // New messages behind c: the claim takes c alone; then the fresh ones together.
      await s.append([msg('t', { id: 'd' }), msg('t', { id: 'e' })]);
      const two = await s.claim(claimReq('t', 'g'));
      assert.deepEqual(ids(two), ['c']);
      assert.equal(two[0]!.recovered, true);
      const three = await s.claim(claimReq('t', 'g'));
      assert.deepEqual(ids(three), ['d', 'e']);
      assert.deepEqual(three.map((c) => c.recovered), [undefined, undefined]);
    });

    it('5c. a claim stops before a recovered delivery that is not first', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      await s.append([msg('t', { id: 'a' }), msg('t', { id: 'b' })]);
      const [a] = await s.claim(claimReq('t', 'g', { leaseMs: 300 }));
      assert.equal(await s.retry(a!, 0, 'failed'), true); // a is pending again: not recovered
      await sleep(400); // b's lease expires
      await s.append([msg('t', { id: 'c' })]);
      const got = await s.claim(claimReq('t', 'g'));
      assert.deepEqual(ids(got), ['a'], 'stops before b');
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g'))), ['b']);
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g'))), ['c']);
    });

    it('6. retry hides for its backoff then returns at attempt + 1; release returns at once without an attempt', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      await s.append([msg('t', { id: 'r' })]);
      const [c1] = await s.claim(claimReq('t', 'g'));
      const retriedAt = Date.now();
      assert.equal(await s.retry(c1!, 300, 'boom'), true);
      assert.deepEqual(await s.claim(claimReq('t', 'g')), []);
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 1, leased: 0, dead: 0 });
      let c2: Claimed | undefined;
      while (!c2) {
        [c2] = await s.claim(claimReq('t', 'g'));
        if (!c2) await sleep(10);
      }
      assert.ok(Date.now() - retriedAt >= 295, 'returned before its backoff');
      assert.equal(c2.attempt, 2);
      await s.release([c2]);
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 1, leased: 0, dead: 0 });
      const [c3] = await s.claim(claimReq('t', 'g'));
      assert.equal(c3!.attempt, 2);
      assert.equal(c3!.deliveryId, c2.deliveryId);
    });

    it('7. kill dead-letters and stats count it as dead', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      await s.append([msg('t'), msg('t')]);
      const [c] = await s.claim(claimReq('t', 'g', { max: 1 }));
      assert.equal(await s.kill(c!, 'fatal'), true);
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 1, leased: 0, dead: 1 });
      const rest = await s.claim(claimReq('t', 'g'));
      assert.equal(rest.length, 1);
      assert.notEqual(rest[0]!.deliveryId, c!.deliveryId);
      assert.equal(await s.kill(c!, 'again'), false);
    });

    it('8. per-key lanes: only the head is claimable; ack or kill promotes exactly the next', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      await s.append([
        msg('t', { id: 'a1', key: 'a' }),
        msg('t', { id: 'a2', key: 'a' }),
        msg('t', { id: 'a3', key: 'a' }),
        msg('t', { id: 'b1', key: 'b' }),
        msg('t', { id: 'u1' }),
      ]);
      const first = await s.claim(claimReq('t', 'g'));
      assert.deepEqual(ids(first), ['a1', 'b1', 'u1']);
      const [a1, b1] = first;
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 2, leased: 3, dead: 0 });
      assert.equal(await s.retry(a1!, 1000, 'later'), true);
      await s.append([msg('t', { id: 'u2' })]);
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g'))), ['u2'], 'unkeyed messages pass a blocked lane');
      await s.ack([b1!]);
      assert.deepEqual(await s.claim(claimReq('t', 'g')), [], 'a retried head keeps its lane blocked');
      await sleep(1050);
      const again = await s.claim(claimReq('t', 'g'));
      assert.deepEqual(ids(again), ['a1']);
      assert.equal(again[0]!.attempt, 2);
      await s.ack(again);
      const a2 = await s.claim(claimReq('t', 'g'));
      assert.deepEqual(ids(a2), ['a2']);
      await s.kill(a2[0]!, 'dead');
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g'))), ['a3']);
    });

    it('9. maxInFlight caps the group across claims; acks and expired leases free slots', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      await s.append(Array.from({ length: 5 }, (_, i) => msg('t', { id: `m${i}` })));
      const other = await h.open();
      const first = await s.claim(claimReq('t', 'g', { maxInFlight: 2 }));
      assert.deepEqual(ids(first), ['m0', 'm1']);
      assert.deepEqual(await other.claim(claimReq('t', 'g', { maxInFlight: 2 })), []);
      await s.ack([first[0]!]);
      const third = await other.claim(claimReq('t', 'g', { maxInFlight: 2, leaseMs: 250 }));
      assert.deepEqual(ids(third), ['m2']);
      assert.deepEqual(await s.claim(claimReq('t', 'g', { maxInFlight: 2 })), []);
      await sleep(320);
      const back = await s.claim(claimReq('t', 'g', { maxInFlight: 2 }));
      assert.deepEqual(ids(back), ['m2']);
      assert.equal(back[0]!.attempt, 2);
      assert.deepEqual(await s.claim(claimReq('t', 'g', { maxInFlight: 2 })), []);
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g', { maxInFlight: 0 }))), ['m3', 'm4']);
    });

    it('10. deliverAt: never early, past is immediate, a scheduled head blocks its lane, a promoted successor waits for its time', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      const now = Date.now();
      const due = now + 1000;
      await s.append([
        msg('t', { id: 'future', deliverAt: new Date(due) }),
        msg('t', { id: 'past', deliverAt: new Date(now - 60_000) }),
        msg('t', { id: 'k-sched', key: 'k', deliverAt: new Date(due) }),
        msg('t', { id: 'k-next', key: 'k' }),
        msg('t', { id: 'j-head', key: 'j' }),
        msg('t', { id: 'j-sched', key: 'j', deliverAt: new Date(due) }),
      ]);
      const first = await s.claim(claimReq('t', 'g'));
      assert.deepEqual(ids(first), ['past', 'j-head']);
      await s.ack(first);
      assert.deepEqual(await s.claim(claimReq('t', 'g')), [], 'the promoted j-sched waits for its own time');
      const got: string[] = [];
      while (got.length < 3) {
        const cs = await s.claim(claimReq('t', 'g'));
        for (const c of cs) assert.ok(Date.now() >= due, `${c.message.id} claimed ${due - Date.now()} ms early`);
        got.push(...ids(cs));
        if (cs.length === 0) await sleep(10);
      }
      assert.deepEqual(got, ['future', 'k-sched', 'j-sched']);
      assert.deepEqual(await s.claim(claimReq('t', 'g')), [], 'k-next waits behind its leased head');
    });

    it('11. purge keeps live deliveries and retained messages; dead rows age from death, scheduled messages from their due time', async () => {
      const hour = 3_600_000;
      const old = new Date(Date.now() - 2 * hour);
      await s.ensureGroup('t', 'g', 'latest');
      await s.append([msg('t', { id: 'pending', publishedAt: old }), msg('t', { id: 'leased', publishedAt: old }), msg('t', { id: 'done', publishedAt: old }), msg('t', { id: 'dead', publishedAt: old })]);
      const cs = await s.claim(claimReq('t', 'g'));
      const byId = new Map(cs.map((c) => [c.message.id, c]));
      await s.release([byId.get('pending')!]);
      await s.ack([byId.get('done')!]);
      await s.kill(byId.get('dead')!, 'x');
      // A scheduled message on a topic without groups, published long ago but due later.
      await s.append([msg('sched', { id: 'sched', publishedAt: old, deliverAt: new Date(Date.now() + 60_000) })]);

      assert.equal(await s.purge({ deadRetentionMs: hour, ackedRetentionMs: hour }, 100), 0, 'nothing is an hour past its end');
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 1, leased: 1, dead: 1 });
      await s.ensureGroup('t', 'late', 'earliest');
      const late = await s.claim(claimReq('t', 'late'));
      assert.deepEqual(ids(late).sort(), ['dead', 'done', 'leased', 'pending'], 'a late earliest group still sees finished messages');
      await s.ack(late);

      await sleep(120);
      // More than 100 ms ago: the dead row died, and 'done' and 'dead' were finished by every group
      // (once its dead row is gone, 'dead' has only acked deliveries left). 'sched' is not due yet.
      assert.equal(await s.purge({ deadRetentionMs: 100, ackedRetentionMs: 100 }, 100), 3);
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 1, leased: 1, dead: 0 });
      await s.ensureGroup('t', 'later', 'earliest');
      assert.deepEqual(ids(await s.claim(claimReq('t', 'later'))).sort(), ['leased', 'pending']);
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g'))), ['pending']);
      await s.ensureGroup('sched', 'g', 'earliest');
      assert.deepEqual(counts(await s.stats('sched', 'g')), { pending: 1, leased: 0, dead: 0 }, 'a scheduled message ages from its due time');
    });

    it('11b. purge deletes at most batch rows of each kind', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      await s.append(Array.from({ length: 7 }, () => msg('t')));
      const cs = await s.claim(claimReq('t', 'g'));
      for (const c of cs.slice(0, 4)) await s.kill(c, 'x');
      await s.ack(cs.slice(4));
      await sleep(20);
      const policy = { deadRetentionMs: 1, ackedRetentionMs: 1 };
      // 4 dead rows and 7 messages (a message goes once its dead row has): 2 + 2 of each per call.
      const removed = [];
      for (let i = 0; i < 5; i++) removed.push(await s.purge(policy, 2));
      assert.deepEqual(removed, [4, 4, 2, 1, 0]);
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
    });

    it('12. large batches on every path; bytes, unicode and maximum lengths round-trip', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      const many = Array.from({ length: 1201 }, (_, i) => msg('t', { id: `m${i}` }));
      await s.append(many);
      await s.ensureGroup('t', 'backfill', 'earliest');
      const cs = await s.claim(claimReq('t', 'g', { max: 2000 }));
      assert.deepEqual(ids(cs), many.map((m) => m.id));
      assert.equal((await s.extend(cs, 60_000)).length, 1201);
      await s.release(cs);
      const again = await s.claim(claimReq('t', 'g', { max: 2000 }));
      assert.equal(again.length, 1201);
      assert.ok(again.every((c) => c.attempt === 1));
      assert.deepEqual(await s.ack(again), again.map((c) => c.deliveryId));
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 0, leased: 0, dead: 0 });
      assert.deepEqual(counts(await s.stats('t', 'backfill')), { pending: 1201, leased: 0, dead: 0 });

      const topic = 'T'.repeat(MAX_NAME_LENGTH);
      const group = 'G'.repeat(MAX_NAME_LENGTH);
      await s.ensureGroup(topic, group, 'latest');
      const all = new Uint8Array(256).map((_, i) => i);
      const published = new Date(Date.now() - 5000);
      const deliverAt = new Date(Date.now() - 1000);
      const samples: StoredMessage[] = [
        { id: 'i'.repeat(MAX_ID_LENGTH), topic, key: 'k'.repeat(MAX_ID_LENGTH), payload: all, publishedAt: published },
        { id: 'empty', topic, payload: new Uint8Array(0), publishedAt: published, headers: {} },
        { id: 'ünïcødé-🚀', topic, key: '键-🔑', payload: new TextEncoder().encode('ß'), publishedAt: published, deliverAt, headers: { 'x-ü': 'ñ 🚀', empty: '' } },
      ];
      await s.append(samples);
      const got = await s.claim(claimReq(topic, group));
      assert.equal(got.length, 3);
      for (let i = 0; i < 3; i++) {
        const m = got[i]!.message;
        assert.ok(m.payload instanceof Uint8Array);
        assert.deepEqual({ ...m, payload: [...m.payload] }, { ...samples[i], payload: [...samples[i]!.payload] });
        assert.equal(got[i]!.deliveryId, deliveryId(samples[i]!.id, group));
      }
    });

    it('13. appends to thousands of distinct topics at once', async () => {
      const topics = Array.from({ length: 2500 }, (_, i) => `topic-${i}`);
      for (const t of topics.slice(0, 50)) await s.ensureGroup(t, 'g', 'latest');
      await s.append(topics.map((t) => msg(t, { id: `on-${t}` })));
      for (const t of ['topic-0', 'topic-49']) {
        assert.deepEqual(ids(await s.claim(claimReq(t, 'g'))), [`on-${t}`]);
      }
      assert.deepEqual(counts(await s.stats('topic-10', 'g')), { pending: 1, leased: 0, dead: 0 });
      await s.ensureGroup('topic-2499', 'g', 'earliest');
      assert.deepEqual(ids(await s.claim(claimReq('topic-2499', 'g'))), ['on-topic-2499']);
    });

    it('14. ack and extend report which deliveries are still held', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      await s.append([msg('t', { id: 'a' }), msg('t', { id: 'b' }), msg('t', { id: 'c' })]);
      const [a] = await s.claim(claimReq('t', 'g', { max: 1, leaseMs: 200 }));
      const [b, c] = await s.claim(claimReq('t', 'g', { max: 2 }));
      await sleep(260);
      const [a2] = await s.claim(claimReq('t', 'g'));
      assert.equal(a2!.message.id, 'a');
      assert.deepEqual(await s.ack([a!, b!, c!]), [b!.deliveryId, c!.deliveryId]);
      assert.deepEqual(await s.extend([a!, a2!, b!], 60_000), [a2!.deliveryId]);
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 0, leased: 1, dead: 0 });
    });

    it('the janitor role is held by one instance at a time', async () => {
      const other = await h.open();
      assert.ok(s.acquireJanitor && other.acquireJanitor, 'store offers acquireJanitor');
      assert.equal(await s.acquireJanitor('one', 60_000), true);
      assert.equal(await other.acquireJanitor!('two', 60_000), false);
      assert.equal(await s.acquireJanitor('one', 50), true, 'the holder renews (here for a shorter time)');
      await sleep(120);
      assert.equal(await other.acquireJanitor!('two', 60_000), true, 'an expired role passes on');
      assert.equal(await s.acquireJanitor('one', 60_000), false);
    });

    it('operations on a closed store reject', async () => {
      await s.close();
      await assert.rejects(s.ping());
      await assert.rejects(s.append([msg('t')]));
    });
  });
}
