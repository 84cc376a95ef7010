/**
 * The Postgres store's pause, rate limit and priorities at the SPI, where
 * its SQL decides: a pause stored through one instance holds another's
 * claims on each claim path (plain, capped, rate-limited), its poll and
 * stats, and a resume reaches the other instance's listener; rate-limited
 * claims from several instances at once never start more than `max` in any
 * window, by the claim instants the database wrote; claim order by
 * priority with keyed lanes and the recovered-alone rule; a backfill and
 * listMessages keep a message's priority; removeGroup takes the group's
 * rate records. The store-neutral conformance tests (test/stores/) cover
 * the contract on every store; these check the Postgres statements.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import type { StoredMessage } from '../../src/queue/types.js';
import { installClaimLog, readClaimLog } from '../helpers/pg-claim-log.js';
import { busiestWindow } from '../helpers/windows.js';
import { claimReq, ids, msg, waitFor } from '../stores/helpers.js';
import { POSTGRES_SKIP, POSTGRES_URL, adminPool, dropSchema, testSchema } from '../stores/postgres-env.js';

describe('postgres store: pause, rate limits, priorities', { skip: POSTGRES_SKIP }, () => {
  const schemas: string[] = [];
  const stores: PostgresStore[] = [];
  const aborts: AbortController[] = [];
  const fresh = () => {
    const s = testSchema('flow');
    schemas.push(s);
    return s;
  };
  /** Another instance on `schema`: a store with a pool of its own. */
  const open = async (schema: string, poolSize = 2) => {
    const s = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize });
    stores.push(s);
    return s;
  };
  after(async () => {
    for (const a of aborts) a.abort();
    for (const s of stores) await s.close().catch(() => undefined);
    for (const s of schemas) await dropSchema(s);
  });

  it('a pause stored by one instance holds the other\'s plain, capped and rate-limited claims, its poll and stats; the resume wakes its listener', async () => {
    const schema = fresh();
    const a = await open(schema);
    const b = await open(schema);
    await a.ensureGroup('t', 'g', 'latest');
    await a.append([msg('t'), msg('t'), msg('t')]);
    const heard: string[] = [];
    const stop = new AbortController();
    aborts.push(stop);
    const listening = b.listen(stop.signal, (topic) => heard.push(topic));
    assert.equal(await a.setGroupPaused('t', 'g', true), true);
    const paths = [claimReq('t', 'g'), claimReq('t', 'g', { maxInFlight: 5 }), claimReq('t', 'g', { rateLimit: { max: 10, intervalMs: 60_000 } })];
    for (const req of paths) assert.deepEqual(await b.claim(req), [], JSON.stringify(req));
    assert.deepEqual(await b.duePairs([{ topic: 't', group: 'g' }]), []);
    const st = await b.stats('t', 'g');
    assert.equal(st.paused, true);
    assert.equal(st.pending, 3);
    assert.equal((await adminPool.query(`SELECT count(*)::int AS n FROM "${schema}".claim_starts`)).rows[0].n, 0, 'a paused claim records no start');
    // Pausing again is no change; the group stays paused.
    assert.equal(await a.setGroupPaused('t', 'g', true), true);
    assert.equal((await b.stats('t', 'g')).paused, true);

    // The listener connects on its own time: resume until it has heard one.
    await waitFor(async () => {
      assert.equal(await a.setGroupPaused('t', 'g', false), true);
      return heard.includes('t');
    }, 5000, 'the resume to reach the other instance');
    assert.deepEqual(await b.duePairs([{ topic: 't', group: 'g' }]), [{ topic: 't', group: 'g' }]);
    assert.equal((await b.stats('t', 'g')).paused, false);
    assert.equal((await b.claim(paths[2]!)).length, 3);
    assert.equal(await a.setGroupPaused('t', 'nobody', true), false, 'an unregistered group');
    assert.equal(await a.setGroupPaused('nowhere', 'g', false), false);
    stop.abort();
    await listening;
  });

  it('rate-limited claims from 4 instances at once start at most max deliveries in any window, by the claim instants the database wrote', async () => {
    const schema = fresh();
    const instances = await Promise.all(Array.from({ length: 4 }, () => open(schema)));
    await instances[0]!.ensureGroup('t', 'g', 'latest');
    const LEASE = 60_000;
    await installClaimLog(schema, LEASE);
    const TOTAL = 120;
    await instances[0]!.append(Array.from({ length: TOTAL }, () => msg('t')));
    const limit = { max: 15, intervalMs: 250 };
    let done = 0;
    await Promise.all(
      instances.map(async (store, i) => {
        while (done < TOTAL) {
          const cs = await store.claim(claimReq('t', 'g', { runnerId: `r${i}`, max: 4, leaseMs: LEASE, rateLimit: limit }));
          done += cs.length;
          if (cs.length > 0) await store.ack(cs);
          else await new Promise((r) => setTimeout(r, 5));
        }
      }),
    );
    const at = (await readClaimLog(schema)).map((r) => r.atUs);
    assert.equal(at.length, TOTAL, 'each delivery claimed once');
    const worst = busiestWindow(at, limit.intervalMs * 1000);
    assert.ok(worst <= limit.max, `${worst} claims within ${limit.intervalMs} ms`);
    // Pruned by each claim to its own interval: what is left spans about
    // one interval (the last prune's, plus the moment to the claim after it).
    const left = await adminPool.query<{ span_ms: number | null }>(
      `SELECT (extract(epoch FROM max(started_at) - min(started_at)) * 1000)::float8 AS span_ms FROM "${schema}".claim_starts`,
    );
    assert.ok((left.rows[0]!.span_ms ?? 0) < 2 * limit.intervalMs, `claim_starts spans ${left.rows[0]!.span_ms} ms`);
  });

  it('claims take the highest priority first, then publish order; a keyed lane keeps publish order and its head competes by its own priority', async () => {
    const schema = fresh();
    const s = await open(schema);
    await s.ensureGroup('t', 'g', 'latest');
    const m = (id: string, priority: number, key?: string): StoredMessage => msg('t', { id, ...(priority ? { priority } : {}), ...(key ? { key } : {}) });
    // k-low heads lane k at priority -1; k-high waits behind it, whatever its priority.
    await s.append([m('a0', 0), m('k-low', -1, 'k'), m('b5', 5), m('k-high', 9, 'k'), m('c5', 5), m('d0', 0), m('e-max', 2 ** 31 - 1)]);
    const first = await s.claim(claimReq('t', 'g', { max: 4 }));
    assert.deepEqual(ids(first), ['e-max', 'b5', 'c5', 'a0']);
    assert.deepEqual(first.map((c) => c.message.priority), [2 ** 31 - 1, 5, 5, undefined], 'priority 0 is left out, as publish leaves it');
    const second = await s.claim(claimReq('t', 'g', { max: 4 }));
    assert.deepEqual(ids(second), ['d0', 'k-low']);
    assert.deepEqual(await s.claim(claimReq('t', 'g')), [], 'k-high waits for its lane head');
    await s.ack(second);
    assert.deepEqual(ids(await s.claim(claimReq('t', 'g'))), ['k-high']);
  });

  it('an expired lease is claimed alone, in claim order: the candidates before it first, then it alone', async () => {
    const schema = fresh();
    const s = await open(schema);
    await s.ensureGroup('t', 'g', 'latest');
    await s.append([msg('t', { id: 'lost', priority: 3 })]);
    const lost = await s.claim(claimReq('t', 'g', { leaseMs: 1 }));
    assert.deepEqual(ids(lost), ['lost']);
    await s.append([msg('t', { id: 'p9', priority: 9 }), msg('t', { id: 'p1', priority: 1 }), msg('t', { id: 'p3', priority: 3 })]);
    await new Promise((r) => setTimeout(r, 20));
    // Claim order: p9, lost (3, published before p3), p3, p1.
    const one = await s.claim(claimReq('t', 'g'));
    assert.deepEqual(ids(one), ['p9']);
    const two = await s.claim(claimReq('t', 'g'));
    assert.deepEqual(ids(two), ['lost']);
    assert.equal(two[0]!.recovered, true);
    assert.deepEqual(ids(await s.claim(claimReq('t', 'g'))), ['p3', 'p1']);
  });

  it('a backfilled group and listMessages keep each message\'s priority; removeGroup deletes the group\'s rate records', async () => {
    const schema = fresh();
    const s = await open(schema);
    await s.ensureGroup('t', 'first', 'latest');
    await s.append([msg('t', { id: 'low', priority: -5 }), msg('t', { id: 'plain' }), msg('t', { id: 'high', priority: 7 })]);
    await s.ensureGroup('t', 'late', 'earliest');
    const claimed = await s.claim(claimReq('t', 'late', { rateLimit: { max: 100, intervalMs: 60_000 } }));
    assert.deepEqual(ids(claimed), ['high', 'plain', 'low']);
    const page = await s.listMessages('t', { limit: 10 });
    assert.deepEqual(page.messages.map((x) => [x.id, x.priority]), [['low', -5], ['plain', undefined], ['high', 7]]);
    const records = async () => (await adminPool.query(`SELECT count(*)::int AS n FROM "${schema}".claim_starts WHERE grp = 'late'`)).rows[0].n as number;
    assert.equal(await records(), 1);
    await s.ack(claimed);
    assert.equal(await s.removeGroup('t', 'late'), true);
    assert.equal(await records(), 0);
  });
});
