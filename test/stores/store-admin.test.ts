/**
 * Store-level conformance of the operations on groups and topics
 * (`removeGroup`, `listGroups`, `listMessages`): every case runs against
 * every store in STORE_FACTORIES, through the Store SPI alone.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { Claimed, MessagePage, Store } from '../../src/queue/types.js';
import { STORE_FACTORIES } from './factories.js';
import type { StoreHarness } from './factories.js';
import { claimReq, ids, msg, sleep } from './helpers.js';

/** Every message of `topic`, read `limit` at a time; also returns the page sizes. */
async function readAll(s: Store, topic: string, limit: number): Promise<{ ids: string[]; pages: number[] }> {
  const out: string[] = [];
  const pages: number[] = [];
  let page: MessagePage | undefined;
  do {
    page = await s.listMessages!(topic, page?.next === undefined ? { limit } : { after: page.next, limit });
    pages.push(page.messages.length);
    out.push(...page.messages.map((m) => m.id));
  } while (page.next !== undefined);
  return { ids: out, pages };
}

for (const factory of STORE_FACTORIES) {
  describe(`store level, groups and topics: ${factory.name}`, { skip: factory.skip }, () => {
    let h: StoreHarness;
    let s: Store;
    beforeEach(async () => {
      h = await factory.create();
      s = await h.open();
    });
    afterEach(() => h.cleanup());

    it('removeGroup deletes the group and its deliveries in every state; tokens it held are no longer held', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      await s.ensureGroup('t', 'other', 'latest');
      await s.ensureGroup('u', 'g', 'latest');
      await s.append([msg('t', { id: 'acked' }), msg('t', { id: 'dead' }), msg('t', { id: 'leased' }), msg('t', { id: 'pending' }), msg('u', { id: 'u1' })]);
      const cs = await s.claim(claimReq('t', 'g', { max: 3 }));
      assert.deepEqual(ids(cs), ['acked', 'dead', 'leased']);
      await s.ack([cs[0]!]);
      await s.kill(cs[1]!, 'x');
      assert.deepEqual(await s.stats('t', 'g'), { pending: 1, leased: 1, dead: 1 });

      assert.equal(await s.removeGroup!('t', 'g'), true);
      assert.equal(await s.removeGroup!('t', 'g'), false, 'a second removal finds nothing');
      assert.equal(await s.removeGroup!('t', 'never'), false);
      assert.deepEqual(await s.stats('t', 'g'), { pending: 0, leased: 0, dead: 0 });
      assert.deepEqual(await s.listGroups!(), [{ topic: 't', group: 'other' }, { topic: 'u', group: 'g' }]);
      // The lease taken before the removal: every fenced write reports "not held".
      const leased = cs[2]!;
      assert.deepEqual(await s.ack([leased]), []);
      assert.deepEqual(await s.extend([leased], 60_000), []);
      assert.equal(await s.retry(leased, 0, 'x'), false);
      assert.equal(await s.kill(leased, 'x'), false);
      await s.release([leased]);
      assert.deepEqual(await s.claim(claimReq('t', 'g')), []);
      // Later publishes do not fan out to it; the other group and topic are untouched.
      await s.append([msg('t', { id: 'after' })]);
      assert.deepEqual(await s.claim(claimReq('t', 'g')), []);
      assert.deepEqual(ids(await s.claim(claimReq('t', 'other'))), ['acked', 'dead', 'leased', 'pending', 'after']);
      assert.deepEqual(ids(await s.claim(claimReq('u', 'g'))), ['u1']);

      // Registering it again starts afresh: an earliest group gets every retained message at attempt 1, acked ones included.
      await s.ensureGroup('t', 'g', 'earliest');
      const again = await s.claim(claimReq('t', 'g'));
      assert.deepEqual(ids(again), ['acked', 'dead', 'leased', 'pending', 'after']);
      assert.ok(again.every((c) => c.attempt === 1));
      assert.deepEqual(await s.stats('t', 'g'), { pending: 0, leased: 5, dead: 0 });
    });

    it('after removeGroup the janitor purges messages no other group needs, and keeps the rest', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      await s.ensureGroup('t', 'keeper', 'latest');
      await s.append([msg('t', { id: 'a' }), msg('t', { id: 'b' })]);
      const [ka] = await s.claim(claimReq('t', 'keeper', { max: 1 }));
      await s.ack([ka!]); // keeper finished 'a', still needs 'b'
      await s.claim(claimReq('t', 'g', { max: 1 })); // g holds 'a', 'b' pending
      await sleep(30);
      const policy = { deadRetentionMs: 10, ackedRetentionMs: 10 };
      assert.equal(await s.purge(policy, 100), 0, 'g still needs both');
      assert.equal(await s.removeGroup!('t', 'g'), true);
      await sleep(20);
      assert.equal(await s.purge(policy, 100), 1, "'a' is finished for every remaining group");
      await s.ensureGroup('t', 'probe', 'earliest');
      assert.deepEqual(ids(await s.claim(claimReq('t', 'probe'))), ['b']);

      // A topic whose only group is removed is purged entirely, pending rows and all.
      await s.ensureGroup('v', 'only', 'latest');
      await s.append([msg('v', { id: 'v1' }), msg('v', { id: 'v2' })]);
      await s.claim(claimReq('v', 'only', { max: 1 }));
      await sleep(30);
      assert.equal(await s.purge(policy, 100), 0);
      await s.removeGroup!('v', 'only');
      await sleep(20);
      assert.equal(await s.purge(policy, 100), 2);
      assert.deepEqual((await s.listMessages!('v', { limit: 10 })).messages, []);
    });

    it('listGroups lists every registered group, sorted by topic then group, or those of one topic', async () => {
      assert.deepEqual(await s.listGroups!(), []);
      for (const [t, g] of [['b', 'z'], ['a', 'y'], ['b', 'A'], ['a', 'x'], ['B', 'q'], ['b', 'a-1'], ['b', 'a.1']]) await s.ensureGroup(t!, g!, 'latest');
      await s.ensureGroup('a', 'x', 'earliest'); // registering again adds nothing
      assert.deepEqual(await s.listGroups!(), [
        { topic: 'B', group: 'q' },
        { topic: 'a', group: 'x' },
        { topic: 'a', group: 'y' },
        { topic: 'b', group: 'A' },
        { topic: 'b', group: 'a-1' },
        { topic: 'b', group: 'a.1' },
        { topic: 'b', group: 'z' },
      ]);
      assert.deepEqual(await s.listGroups!('a'), [{ topic: 'a', group: 'x' }, { topic: 'a', group: 'y' }]);
      assert.deepEqual(await s.listGroups!('nothing'), []);
      const other = await h.open();
      assert.deepEqual((await other.listGroups!('B')), [{ topic: 'B', group: 'q' }], 'another instance sees them');
    });

    it('listMessages pages through a topic in publish order; next is absent after the last message', async () => {
      const when = new Date(Date.now() + 60_000);
      const ms = Array.from({ length: 10 }, (_, i) => msg('t', { id: `m${i}` }));
      ms[3] = msg('t', { id: 'm3', key: 'k', headers: { h: 'v', ü: '✓' }, deliverAt: when, payload: new Uint8Array([0, 255, 1]) });
      await s.append(ms.slice(0, 5));
      await s.append([msg('other', { id: 'o1' })]);
      await s.append(ms.slice(5));
      for (const limit of [1, 3, 5, 10, 11, 100]) {
        const r = await readAll(s, 't', limit);
        assert.deepEqual(r.ids, ms.map((m) => m.id), `limit ${limit}`);
        assert.ok(r.pages.every((n, i) => n === limit || i === r.pages.length - 1), `full pages but the last at limit ${limit}: ${r.pages.join()}`);
        assert.equal(r.pages.length, Math.max(1, Math.ceil(10 / limit)), `no empty trailing page at limit ${limit}`);
      }
      const first = await s.listMessages!('t', { limit: 4 });
      const m3 = first.messages[3]!;
      assert.equal(m3.key, 'k');
      assert.deepEqual(m3.headers, { h: 'v', ü: '✓' });
      assert.deepEqual([...m3.payload], [0, 255, 1]);
      assert.equal(m3.deliverAt?.getTime(), when.getTime());
      assert.equal(m3.publishedAt.getTime(), ms[3]!.publishedAt.getTime());
      assert.equal(first.messages[0]!.key, undefined);
      assert.equal(first.messages[0]!.headers, undefined);
      assert.deepEqual((await s.listMessages!('none', { limit: 5 })), { messages: [] });

      // A message appended after a page was read comes after it.
      const p1 = await s.listMessages!('t', { limit: 10 });
      assert.equal(p1.next, undefined);
      const tail = (await s.listMessages!('t', { after: (await s.listMessages!('t', { limit: 9 })).next!, limit: 10 })).messages;
      assert.deepEqual(ids2(tail), ['m9']);
      await s.append([msg('t', { id: 'late' })]);
      const p2 = await s.listMessages!('t', { limit: 10 });
      assert.notEqual(p2.next, undefined, 'now a message follows');
      assert.deepEqual(ids2((await s.listMessages!('t', { after: p2.next!, limit: 10 })).messages), ['late']);
    });

    it('listMessages leaves out purged messages and keeps the ones a group still needs', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      await s.append([msg('t', { id: 'done' }), msg('t', { id: 'open' })]);
      const [c] = await s.claim(claimReq('t', 'g', { max: 1 }));
      await s.ack([c!]);
      await sleep(30);
      assert.equal(await s.purge({ deadRetentionMs: 10, ackedRetentionMs: 10 }, 100), 1);
      assert.deepEqual(ids2((await s.listMessages!('t', { limit: 10 })).messages), ['open']);
    });

    it('removeGroup at once with appends, claims and acks of that group, from several instances, leaves no delivery behind', async () => {
      const others = [await h.open(), await h.open()];
      for (let round = 0; round < 4; round++) {
        const t = `race${round}`;
        await s.ensureGroup(t, 'g', 'latest');
        await s.ensureGroup(t, 'keep', 'latest');
        await s.append(Array.from({ length: 20 }, (_, i) => msg(t, { id: `${t}-a${i}` })));
        const held: Claimed[] = await others[0]!.claim(claimReq(t, 'g', { max: 10 }));
        const results = await Promise.all([
          others[1]!.removeGroup!(t, 'g'),
          s.append(Array.from({ length: 20 }, (_, i) => msg(t, { id: `${t}-b${i}` }))),
          others[0]!.claim(claimReq(t, 'g', { max: 5 })),
          others[0]!.ack(held.slice(0, 5)),
          s.append(Array.from({ length: 20 }, (_, i) => msg(t, { id: `${t}-c${i}` }))),
          others[1]!.extend(held.slice(5), 60_000),
        ]);
        assert.equal(results[0], true);
        // Whatever ran first, nothing of the group is left: a new registration starts empty.
        await s.ensureGroup(t, 'g', 'latest');
        assert.deepEqual(await s.stats(t, 'g'), { pending: 0, leased: 0, dead: 0 }, `round ${round}`);
        assert.deepEqual(await s.claim(claimReq(t, 'g')), []);
        assert.deepEqual(await s.ack(held), [], 'tokens from before the removal are not held');
        assert.deepEqual(await s.stats(t, 'keep'), { pending: 60, leased: 0, dead: 0 }, 'the other group got every message');
      }
    });

    it('removeGroup at once with an earliest registration of the same group ends in one consistent state', async () => {
      await s.append(Array.from({ length: 30 }, (_, i) => msg('t', { id: `m${i}` })));
      const other = await h.open();
      await s.ensureGroup('t', 'g', 'latest');
      await s.append([msg('t', { id: 'x' })]);
      const [removed] = await Promise.all([other.removeGroup!('t', 'g'), s.ensureGroup('t', 'g', 'earliest')]);
      assert.equal(removed, true);
      const registered = (await s.listGroups!('t')).length === 1;
      const stats = await s.stats('t', 'g');
      // Removal last: nothing. Registration last: a fresh earliest group with all 31 messages.
      assert.deepEqual(stats, registered ? { pending: 31, leased: 0, dead: 0 } : { pending: 0, leased: 0, dead: 0 });
    });
  });
}

function ids2(ms: Array<{ id: string }>): string[] {
  return ms.map((m) => m.id);
}
