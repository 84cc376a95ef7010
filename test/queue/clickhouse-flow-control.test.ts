/**
 * The ClickHouse store's flow control and schedules, as only this store does
 * them: a pause written by one handle stops the claims, due pairs and stats
 * of another (the group's row, read under the claim's lock); a rate limit is
 * counted under the group's lock, so claimers on two handles at once share
 * one window, and the stored window never holds more than one window's
 * starts; pause and schedule versions read the same after ClickHouse merges
 * them (OPTIMIZE … FINAL); priorities are refused at publish.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { UnsupportedError } from '../../src/errors.js';
import { createStoreQueue } from '../../src/queue/engine.js';
import type { ClickHouseStore } from '../../src/queue/stores/clickhouse/store.js';
import type { ScheduleRecord } from '../../src/queue/schedules/types.js';
import type { Claimed, Store } from '../../src/queue/types.js';
import { adminQuery, clickhouseFactory } from '../stores/clickhouse-env.js';
import type { StoreHarness } from '../stores/factories.js';
import { claimReq, counts, msg, orHang, sleep } from '../stores/helpers.js';

const T0 = Date.parse('2026-03-01T00:00:00.000Z');
const LONG = 10 * 60_000;

describe('clickhouse flow control', { skip: clickhouseFactory.skip }, () => {
  let h: StoreHarness;
  let a: ClickHouseStore;
  let b: ClickHouseStore;
  beforeEach(async () => {
    h = await clickhouseFactory.create();
    a = (await h.open()) as ClickHouseStore;
    b = (await h.open()) as ClickHouseStore;
  });
  afterEach(async () => {
    await h.cleanup();
  });

  const publish = async (s: Store, n: number, topic = 't') => {
    const ms = Array.from({ length: n }, () => msg(topic));
    await s.append(ms);
    return ms.map((m) => m.id);
  };

  it('a pause written through one handle stops the other handle’s claims and due pairs and shows in its stats; leases already held finish; a resume wakes it', async () => {
    await a.ensureGroup('t', 'g', 'latest');
    await a.ensureGroup('t', 'other', 'latest');
    await publish(a, 4);
    const [held] = await b.claim(claimReq('t', 'g', { max: 1 }));
    assert.ok(held);

    assert.equal(await a.setGroupPaused!('t', 'g', true), true);
    assert.equal(await a.setGroupPaused!('t', 'g', true), true, 'pausing a paused group: still registered');
    assert.deepEqual(await b.claim(claimReq('t', 'g')), []);
    assert.deepEqual(await b.duePairs!([{ topic: 't', group: 'g' }, { topic: 't', group: 'other' }]), [{ topic: 't', group: 'other' }]);
    assert.equal((await b.stats('t', 'g')).paused, true);
    assert.equal((await b.stats('t', 'other')).paused, false);
    // Publishing still fans out to the paused group; its lease still lands.
    await publish(b, 2);
    assert.deepEqual(counts(await b.stats('t', 'g')), { pending: 5, leased: 1, dead: 0 });
    assert.deepEqual(await b.extend([held], 60_000), [held.deliveryId]);
    assert.deepEqual(await b.ack([held]), [held.deliveryId]);

    const woken: string[] = [];
    const stop = new AbortController();
    const listening = b.listen(stop.signal, (topic) => woken.push(topic));
    try {
      assert.equal(await a.setGroupPaused!('t', 'g', false), true);
      assert.deepEqual(woken, ['t'], 'the resume woke the other handle');
    } finally {
      stop.abort();
      await listening;
    }
    assert.equal((await b.stats('t', 'g')).paused, false);
    assert.equal((await b.claim(claimReq('t', 'g'))).length, 5);
  });

  it('setGroupPaused is false for a group never registered or removed, and a group registered again is not paused', async () => {
    assert.equal(await a.setGroupPaused!('t', 'never', true), false);
    assert.equal((await a.stats('t', 'never')).paused, false);
    await a.ensureGroup('t', 'g', 'latest');
    assert.equal(await a.setGroupPaused!('t', 'g', true), true);
    assert.equal(await b.removeGroup('t', 'g'), true);
    assert.equal(await a.setGroupPaused!('t', 'g', false), false);
    assert.equal((await a.stats('t', 'g')).paused, false);
    await b.ensureGroup('t', 'g', 'latest');
    await publish(a, 1);
    assert.equal((await a.stats('t', 'g')).paused, false);
    assert.equal((await b.claim(claimReq('t', 'g'))).length, 1);
  });

  it('a pause at once with claims, publishes and registrations on two handles: no claim after it resolves leases anything, and nothing is lost', async () => {
    await a.ensureGroup('t', 'g', 'latest');
    const first = await publish(a, 20);
    const claimed: Claimed[] = [];
    const claimer = (s: Store) => s.claim(claimReq('t', 'g', { max: 2 })).then((cs) => void claimed.push(...cs));
    const [paused] = await orHang(
      Promise.all([
        a.setGroupPaused!('t', 'g', true),
        claimer(a),
        claimer(b),
        claimer(b),
        publish(b, 5),
        b.ensureGroup('t', 'g2', 'earliest'),
        b.stats('t', 'g'),
        a.duePairs!([{ topic: 't', group: 'g' }]),
      ]),
      'the pause and its neighbours',
    );
    assert.equal(paused, true);
    assert.deepEqual(await Promise.all([a.claim(claimReq('t', 'g')), b.claim(claimReq('t', 'g'))]), [[], []]);
    assert.equal(new Set(claimed.map((c) => c.deliveryId)).size, claimed.length, 'no delivery leased twice');
    assert.deepEqual(counts(await b.stats('t', 'g')), { pending: 25 - claimed.length, leased: claimed.length, dead: 0 });
    assert.equal((await b.stats('t', 'g2')).paused, false);
    assert.ok(first.length === 20);
  });

  it('a rate limit is one window for claimers on two handles at once: exactly max leased, retries count, the others find nothing', async () => {
    await a.ensureGroup('t', 'g', 'latest');
    await publish(a, 40);
    const rateLimit = { max: 7, intervalMs: LONG };
    const rounds = await orHang(
      Promise.all(Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? a : b).claim(claimReq('t', 'g', { max: 3, rateLimit })))),
      'concurrent limited claims',
    );
    const got = rounds.flat();
    assert.equal(got.length, 7);
    assert.equal(new Set(got.map((c) => c.deliveryId)).size, 7);
    // A retry due at once is a new start: the window has no room for it.
    assert.equal(await a.retry(got[0]!, 0, 'again'), true);
    assert.deepEqual(await b.claim(claimReq('t', 'g', { rateLimit })), []);
    // Without the limit (another subscriber's view), the group still claims.
    assert.equal((await b.claim(claimReq('t', 'g', { max: 1 }))).length, 1);
    // The limit is the group's: another group on the topic has its own window.
    await b.ensureGroup('t', 'g2', 'earliest');
    assert.equal((await b.claim(claimReq('t', 'g2', { rateLimit }))).length, 7);
  });

  it('a short window opens again, and the stored window keeps only starts inside it', async () => {
    await a.ensureGroup('t', 'g', 'latest');
    await publish(a, 30);
    const rateLimit = { max: 3, intervalMs: 300 };
    // Claim from both handles, four at once each round, until three windows' worth started: the window opened again twice.
    let total = 0;
    await orHang(
      (async () => {
        while (total < 9) {
          const n = (await Promise.all([a, b, a, b].map((s) => s.claim(claimReq('t', 'g', { max: 2, rateLimit }))))).flat().length;
          if (n === 0) await sleep(20);
          total += n;
        }
      })(),
      'the window opening again',
    );
    const row = (await adminQuery(`SELECT arraySum(argMax(counts, ver)), argMax(starts, ver) FROM \`${a.database}\`.claim_starts WHERE topic = 't' AND grp = 'g' GROUP BY grp FORMAT TSV`)).trim();
    const [sum, starts] = row.split('\t') as [string, string];
    assert.ok(Number(sum) <= 3, `the stored window holds ${sum} starts`);
    const times = (JSON.parse(starts) as number[]).map(Number);
    assert.ok(times.every((t) => times[times.length - 1]! - t <= rateLimit.intervalMs), `older starts were dropped: ${JSON.stringify(times)}`);
  });

  it('pause and schedule versions read the same after ClickHouse merges them', async () => {
    await a.ensureGroup('t', 'g', 'latest');
    await a.setGroupPaused!('t', 'g', true);
    await b.setGroupPaused!('t', 'g', false);
    await a.setGroupPaused!('t', 'g', true);
    const rec = (name: string, revision: string): ScheduleRecord => ({
      name,
      revision,
      spec: { everyMs: 1000, topic: 't', catchUp: 'none', headers: { h: 'v\u0000\ud800' } },
      payload: Uint8Array.from([0, 255, 39, 92]),
      updatedAt: new Date(T0),
    });
    await a.putSchedule!(rec('s', 'r1'));
    await b.advanceSchedule!('s', 'r1', new Date(T0 + 5000));
    await a.putSchedule!(rec('s', 'r2'));
    await b.advanceSchedule!('s', 'r2', new Date(T0 + 2000));
    await a.putSchedule!(rec('gone', 'r1'));
    await b.deleteSchedule!('gone');
    const before = [await b.listSchedules!(), (await b.stats('t', 'g')).paused];
    for (const table of ['groups', 'schedules']) await adminQuery(`OPTIMIZE TABLE \`${a.database}\`.${table} FINAL`);
    assert.deepEqual([await a.listSchedules!(), (await a.stats('t', 'g')).paused], before);
    const [s] = before[0] as ScheduleRecord[];
    assert.deepEqual([s?.revision, s?.lastTick, Array.from(s!.payload), s?.spec.headers], ['r2', new Date(T0 + 2000), [0, 255, 39, 92], { h: 'v\u0000\ud800' }]);
    assert.equal(before[1], true);
  });

  it('priorities are refused at publish (the claim cannot order by them through an index); rate limits are accepted', async () => {
    assert.deepEqual(a.capabilities, { priority: false, rateLimit: true });
    const q = createStoreQueue(a);
    try {
      await assert.rejects(q.publish({ topic: 't', payload: new Uint8Array(), priority: 5 }), UnsupportedError);
      await q.publish({ topic: 't', payload: new Uint8Array(), priority: 0 });
      const sub = await q.subscribe('t', 'g', async () => undefined, { rateLimit: { max: 10, intervalMs: 1000 } });
      await sub.close();
    } finally {
      await q.close();
    }
  });
});
