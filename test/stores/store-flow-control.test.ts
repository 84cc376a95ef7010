/**
 * Store-level conformance of flow control, through the Store SPI alone:
 * pausing a group (`setGroupPaused`), claim order by priority
 * (`capabilities.priority`) and rate limits (`capabilities.rateLimit`), on
 * every store that has each (flow-stores.ts says which skip).
 *
 * Rate-limit windows are counted on the store's clock, which a test cannot
 * read; so each claim is bracketed by the local time before it was sent and
 * after it came back, and only what those brackets prove is asserted: claims
 * whose starts surely fall in one window start at most `max` in all, and a
 * claim that found no room had at least `max` starts that may be in its
 * window.
 */
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { MAX_PRIORITY, MIN_PRIORITY } from '../../src/queue/types.js';
import type { Claimed, RateLimit, Store, StoredMessage } from '../../src/queue/types.js';
import { FLOW_FACTORIES } from './flow-stores.js';
import { claimReq, counts, harnessPerTest, ids, msg, sleep } from './helpers.js';

const HOUR = 3_600_000;
/** Room for a store clock that counts in coarser steps than ours, ms. */
const SLACK_MS = 5;

/** A message `id` on `topic` at `priority` (left out when 0, as `publish` does). */
function pmsg(topic: string, id: string, priority = 0, extra: Partial<StoredMessage> = {}): StoredMessage {
  return msg(topic, { id, ...(priority === 0 ? {} : { priority }), ...extra });
}

/** Claims one at a time (`max` 1) until a claim comes back empty; the IDs in claim order. */
async function drain(s: Store, topic: string, group: string, max = 1): Promise<string[]> {
  const out: string[] = [];
  for (;;) {
    const got = await s.claim(claimReq(topic, group, { max }));
    if (got.length === 0) return out;
    out.push(...ids(got));
  }
}

const isPaused = async (s: Store, topic: string, group: string) => (await s.stats(topic, group)).paused === true;

for (const { factory, pause, priority, rateLimit, rateWait } of FLOW_FACTORIES) {
  const ms = (n: number) => n * (factory.slowness ?? 1);

  describe(`store level, pause: ${factory.name}`, { skip: pause }, () => {
    const t = harnessPerTest(factory);
    let s: Store;
    beforeEach(async () => {
      s = await t.h.open();
    });

    it('setGroupPaused on a group that is not registered resolves false and stores nothing', async () => {
      assert.equal(await s.setGroupPaused!('t', 'nobody', true), false);
      assert.equal(await s.setGroupPaused!('t', 'nobody', false), false);
      assert.equal(await isPaused(s, 't', 'nobody'), false);
      // Registered afterwards, the group is not paused.
      await s.ensureGroup('t', 'nobody', 'latest');
      await s.append([pmsg('t', 'a')]);
      assert.deepEqual(ids(await s.claim(claimReq('t', 'nobody'))), ['a']);
    });

    it('a paused group claims nothing on any handle; appends still fan out; resume hands out the backlog in order', async () => {
      const other = await t.h.open();
      await s.ensureGroup('t', 'g', 'latest');
      await s.ensureGroup('t', 'free', 'latest');
      await s.append([pmsg('t', 'a'), pmsg('t', 'b')]);
      assert.equal(await s.setGroupPaused!('t', 'g', true), true);
      assert.equal(await s.setGroupPaused!('t', 'g', true), true, 'pausing again changes nothing');
      assert.deepEqual(await s.claim(claimReq('t', 'g')), []);
      assert.deepEqual(await other.claim(claimReq('t', 'g')), []);
      assert.equal(await isPaused(other, 't', 'g'), true);
      assert.equal(await isPaused(other, 't', 'free'), false);
      // Only that group: another group of the topic claims as usual.
      assert.deepEqual(ids(await other.claim(claimReq('t', 'free'))), ['a', 'b']);
      await other.append([pmsg('t', 'c')]);
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 3, leased: 0, dead: 0 });
      assert.deepEqual(await s.claim(claimReq('t', 'g')), []);

      assert.equal(await other.setGroupPaused!('t', 'g', false), true);
      assert.equal(await isPaused(s, 't', 'g'), false);
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g'))), ['a', 'b', 'c']);
      assert.equal(await s.setGroupPaused!('t', 'g', false), true, 'resuming a running group changes nothing');
    });

    it('while paused, leases run on: acks, renewals, retries and kills land, and ackAndClaim acks but claims nothing', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      await s.append(['a', 'b', 'c', 'd', 'e'].map((id) => pmsg('t', id)));
      const [a, b, c, d, e] = await s.claim(claimReq('t', 'g'));
      assert.equal(await s.setGroupPaused!('t', 'g', true), true);
      assert.deepEqual(await s.ack([a!]), [a!.deliveryId]);
      assert.deepEqual(await s.extend([b!], 60_000), [b!.deliveryId]);
      assert.equal(await s.retry(c!, 0, 'again'), true);
      assert.equal(await s.kill(d!, 'dead'), true);
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 1, leased: 2, dead: 1 });
      assert.deepEqual(await s.claim(claimReq('t', 'g')), [], 'c is due again, but the group is paused');
      if (s.ackAndClaim) {
        const r = await s.ackAndClaim([e!], claimReq('t', 'g'));
        assert.deepEqual(r.acked, [e!.deliveryId]);
        assert.deepEqual(r.claimed, []);
      } else {
        assert.deepEqual(await s.ack([e!]), [e!.deliveryId]);
      }
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 1, leased: 1, dead: 1 });
      assert.equal(await s.setGroupPaused!('t', 'g', false), true);
      const [again] = await s.claim(claimReq('t', 'g'));
      assert.deepEqual([again!.message.id, again!.attempt], ['c', 2]);
    });

    it('duePairs leaves a paused pair out, and has it back once resumed', async (ctx) => {
      if (!s.duePairs) return ctx.skip(`${factory.name} has no duePairs`);
      const pairs = [{ topic: 't', group: 'g1' }, { topic: 't', group: 'g2' }];
      for (const p of pairs) await s.ensureGroup(p.topic, p.group, 'latest');
      await s.append([pmsg('t', 'a')]);
      const due = async () => (await s.duePairs!(pairs)).map((p) => p.group).sort();
      assert.deepEqual(await due(), ['g1', 'g2']);
      assert.equal(await s.setGroupPaused!('t', 'g1', true), true);
      assert.deepEqual(await due(), ['g2']);
      assert.equal(await s.setGroupPaused!('t', 'g1', false), true);
      assert.deepEqual(await due(), ['g1', 'g2']);
    });

    it('a removed group forgets its pause: registered again, it claims', async (ctx) => {
      if (!s.removeGroup) return ctx.skip(`${factory.name} has no removeGroup`);
      await s.ensureGroup('t', 'g', 'latest');
      assert.equal(await s.setGroupPaused!('t', 'g', true), true);
      assert.equal(await s.removeGroup('t', 'g'), true);
      assert.equal(await s.setGroupPaused!('t', 'g', true), false, 'no such group any more');
      await s.ensureGroup('t', 'g', 'latest');
      assert.equal(await isPaused(s, 't', 'g'), false);
      await s.append([pmsg('t', 'a')]);
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g'))), ['a']);
    });
  });

  describe(`store level, priority: ${factory.name}`, { skip: priority }, () => {
    const t = harnessPerTest(factory);
    let s: Store;
    beforeEach(async () => {
      s = await t.h.open();
    });

    it('unkeyed: higher priority first, equal priorities in publish order, whatever the claim size', async () => {
      await s.ensureGroup('t', 'one', 'latest');
      await s.ensureGroup('t', 'all', 'latest');
      const published: Array<[string, number]> = [['a', 0], ['b', 5], ['c', 5], ['d', -3], ['e', 10], ['f', 0], ['g', 5]];
      await s.append(published.slice(0, 4).map(([id, p]) => pmsg('t', id, p)));
      await s.append(published.slice(4).map(([id, p]) => pmsg('t', id, p)));
      const expected = ['e', 'b', 'c', 'g', 'a', 'f', 'd'];
      assert.deepEqual(await drain(s, 't', 'one', 2), expected);
      const all = await s.claim(claimReq('t', 'all'));
      assert.deepEqual(ids(all), expected);
      // The priority comes back with the message; absent when 0.
      const byId = new Map(published);
      for (const c of all) assert.equal(c.message.priority, byId.get(c.message.id) === 0 ? undefined : byId.get(c.message.id), c.message.id);
    });

    it('MIN_PRIORITY and MAX_PRIORITY are stored and ordered like any other', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      await s.append([pmsg('t', 'min', MIN_PRIORITY), pmsg('t', 'zero'), pmsg('t', 'max', MAX_PRIORITY), pmsg('t', 'minus', -1), pmsg('t', 'plus', 1)]);
      const got = await s.claim(claimReq('t', 'g'));
      assert.deepEqual(ids(got), ['max', 'plus', 'zero', 'minus', 'min']);
      assert.deepEqual(got.map((c) => c.message.priority), [MAX_PRIORITY, 1, undefined, -1, MIN_PRIORITY]);
    });

    it('keyed lanes keep publish order; the head of a lane competes by its own priority', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      await s.append([
        pmsg('t', 'k1', 0, { key: 'k' }),
        pmsg('t', 'k2', 10, { key: 'k' }),
        pmsg('t', 'u', 5),
        pmsg('t', 'j1', 7, { key: 'j' }),
        pmsg('t', 'j2', 1, { key: 'j' }),
      ]);
      const first = await s.claim(claimReq('t', 'g'));
      assert.deepEqual(ids(first), ['j1', 'u', 'k1'], 'k2 waits for k1 and j2 for j1, whatever their priorities');
      assert.deepEqual(await s.claim(claimReq('t', 'g')), []);
      await s.ack(first.filter((c) => c.message.key !== undefined));
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g'))), ['k2', 'j2']);
    });

    it('a high priority that is not due yet holds nothing back', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      await s.append([pmsg('t', 'later', 9, { deliverAt: new Date(Date.now() + HOUR) }), pmsg('t', 'now', 0)]);
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g'))), ['now']);
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 1, leased: 1, dead: 0 });
    });

    it('a recovered delivery is claimed alone, and a claim stops before one, in priority order', async () => {
      await s.ensureGroup('t', 'g', 'latest');
      await s.append([pmsg('t', 'r'), pmsg('t', 'b')]);
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g', { max: 1, leaseMs: ms(300) }))), ['r']);
      await sleep(ms(400)); // r's lease runs out, as a crashed holder leaves it
      await s.append([pmsg('t', 'a', 5)]);
      // Claim order: a (5), then r (0, recovered), then b (0): a alone, then r alone, then b.
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g'))), ['a']);
      const again = await s.claim(claimReq('t', 'g'));
      assert.deepEqual(again.map((c) => [c.message.id, c.recovered]), [['r', true]]);
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g'))), ['b']);

      // A recovered delivery of the highest priority comes first, alone.
      await s.ensureGroup('t', 'h', 'latest');
      await s.append([pmsg('t', 'hi', 9)]);
      assert.deepEqual(ids(await s.claim(claimReq('t', 'h', { max: 1, leaseMs: ms(300) }))), ['hi']);
      await sleep(ms(400));
      await s.append([pmsg('t', 'x', 9), pmsg('t', 'y')]);
      const alone = await s.claim(claimReq('t', 'h'));
      assert.deepEqual(alone.map((c) => [c.message.id, c.recovered]), [['hi', true]]);
      assert.deepEqual(ids(await s.claim(claimReq('t', 'h'))), ['x', 'y']);
    });
  });

  describe(`store level, rate limit: ${factory.name}`, { skip: rateLimit }, () => {
    const t = harnessPerTest(factory);
    let s: Store;
    beforeEach(async () => {
      s = await t.h.open();
    });

    const limited = (topic: string, group: string, limit: RateLimit, max = 100) => claimReq(topic, group, { max, rateLimit: limit });

    it('within one window the group starts at most max deliveries, counted across handles; other groups are not counted', async () => {
      const other = await t.h.open();
      const limit = { max: 3, intervalMs: HOUR };
      for (const g of ['g', 'free', 'own']) await s.ensureGroup('t', g, 'latest');
      await s.append(Array.from({ length: 10 }, (_, i) => pmsg('t', `m${i}`)));
      assert.equal((await s.claim(limited('t', 'g', limit, 2))).length, 2);
      assert.equal((await other.claim(limited('t', 'g', limit))).length, 1);
      assert.deepEqual(await s.claim(limited('t', 'g', limit)), []);
      assert.deepEqual(await other.claim(limited('t', 'g', limit)), []);
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 7, leased: 3, dead: 0 });
      // Each group has its own window.
      assert.equal((await other.claim(limited('t', 'own', limit))).length, 3);
      assert.equal((await s.claim(claimReq('t', 'free'))).length, 10);
    });

    it('retries and recoveries are starts too', async () => {
      const limit = { max: 2, intervalMs: HOUR };
      await s.ensureGroup('t', 'retried', 'latest');
      await s.ensureGroup('t', 'recovered', 'latest');
      await s.append(['a', 'b', 'c'].map((id) => pmsg('t', id)));

      const [a] = await s.claim(limited('t', 'retried', limit, 1));
      assert.equal(await s.retry(a!, 0, 'again'), true);
      const [again] = await s.claim(limited('t', 'retried', limit, 1));
      assert.deepEqual([again!.message.id, again!.attempt], ['a', 2]);
      assert.deepEqual(await s.claim(limited('t', 'retried', limit)), [], 'b and c are due, but two starts fill the window');

      assert.deepEqual(ids(await s.claim(claimReq('t', 'recovered', { max: 1, leaseMs: ms(300), rateLimit: limit }))), ['a']);
      await sleep(ms(400));
      const back = await s.claim(limited('t', 'recovered', limit));
      assert.deepEqual(back.map((c) => [c.message.id, c.recovered]), [['a', true]]);
      assert.deepEqual(await s.claim(limited('t', 'recovered', limit)), []);
    });

    it('concurrent claimers on several handles start at most max in all, and max once the window fills', async () => {
      const limit = { max: 5, intervalMs: HOUR };
      const handles = [s, await t.h.open(), await t.h.open(), await t.h.open()];
      await s.ensureGroup('t', 'g', 'latest');
      await s.append(Array.from({ length: 20 }, (_, i) => pmsg('t', `m${i}`)));
      const rounds = await Promise.all(handles.flatMap((x) => [1, 2, 3].map(() => x.claim(limited('t', 'g', limit, 2)))));
      const got: Claimed[] = rounds.flat();
      assert.ok(got.length <= limit.max, `${got.length} started at once`);
      for (const x of handles) got.push(...(await x.claim(limited('t', 'g', limit))));
      assert.equal(got.length, limit.max);
      assert.equal(new Set(ids(got)).size, limit.max, 'no delivery claimed twice');
      assert.deepEqual(counts(await s.stats('t', 'g')), { pending: 15, leased: 5, dead: 0 });
    });

    it('the window slides: over any window at most max start, and room comes back once starts leave it', async () => {
      const limit = { max: 2, intervalMs: ms(300) };
      const total = 9;
      await s.ensureGroup('t', 'g', 'latest');
      await s.append(Array.from({ length: total }, (_, i) => pmsg('t', `m${i}`)));
      const claims: Array<{ sent: number; back: number; n: number }> = [];
      let started = 0;
      while (started < total) {
        const sent = Date.now();
        const n = (await s.claim(limited('t', 'g', limit, 1))).length;
        const back = Date.now();
        claims.push({ sent, back, n });
        started += n;
        assert.ok(claims.length < 10_000, 'hung: the window never had room again');
        if (n === 0) await sleep(ms(20));
      }
      for (const [i, c] of claims.entries()) {
        // Starts surely within one window of this claim's (sent after it was, back before it was sent + interval).
        const sure = claims.slice(i).filter((d) => d.back - c.sent < limit.intervalMs - SLACK_MS).reduce((sum, d) => sum + d.n, 0);
        assert.ok(sure <= limit.max, `claim ${i}: ${sure} starts within one window`);
        // A claim that found no room: at least max starts may be in its window.
        if (c.n === 0) {
          const maybe = claims.slice(0, i).filter((d) => d.back > c.sent - limit.intervalMs - SLACK_MS).reduce((sum, d) => sum + d.n, 0);
          assert.ok(maybe >= limit.max, `claim ${i} found no room with only ${maybe} starts possibly in its window`);
        }
      }
      assert.ok(claims.some((c) => c.n === 0), 'some claim found the window full');
    });

    it('a claim the limit cuts short says how long until the window has room', { skip: rateWait }, async () => {
      const limit = { max: 2, intervalMs: HOUR };
      await s.ensureGroup('t', 'g', 'latest');
      await s.append(['a', 'b', 'c'].map((id) => pmsg('t', id)));
      const waits: number[] = [];
      const got = await s.claim({ ...limited('t', 'g', limit), onRateLimited: (w) => void waits.push(w) });
      assert.equal(got.length, 2);
      assert.equal(waits.length, 1, 'said once');
      assert.ok(waits[0]! >= 1 && waits[0]! <= HOUR, `wait ${waits[0]} ms`);
      // With the window full, the next claim says so too.
      const later: number[] = [];
      assert.deepEqual(await s.claim({ ...limited('t', 'g', limit), onRateLimited: (w) => void later.push(w) }), []);
      assert.equal(later.length, 1);
      assert.ok(later[0]! >= 1 && later[0]! <= waits[0]!, `${later[0]} ms, then ${waits[0]} ms`);
    });
  });
}
