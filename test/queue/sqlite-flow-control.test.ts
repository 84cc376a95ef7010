/**
 * Pause, rate limits and priorities on the SQLite store, where its design
 * makes them hard: two handles on one file (as two instances would be) see
 * one pause flag and one rate-limit record, each read inside the claim's own
 * transaction; priority order holds across messages past the group's cursor,
 * which have no delivery row yet (claim.ts); and a file of schema version 5
 * (fixtures/sqlite-v5.db) is migrated to version 6 keeping its data.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { ClosedError } from '../../src/errors.js';
import { deliveryId } from '../../src/queue/delivery-id.js';
import { MANY_PAIRS } from '../../src/queue/stores/sqlite/due-pairs.js';
import { SCHEMA_VERSION } from '../../src/queue/stores/sqlite/migrate.js';
import { SqliteStore } from '../../src/queue/stores/sqlite/store.js';
import type { Claimed } from '../../src/queue/types.js';
import { claimReq, counts, ids, msg, orHang, sleep, waitFor } from '../stores/helpers.js';

const fixtureV5 = join(import.meta.dirname, 'fixtures', 'sqlite-v5.db');
const HOUR = 3_600_000;
const pair = [{ topic: 't', group: 'g' }];

describe('sqlite store: pause, rate limits and priorities', () => {
  let dir: string;
  let opened: SqliteStore[] = [];
  const open = async (name = 'q.db') => {
    const s = await SqliteStore.open({ path: join(dir, name), synchronous: 'normal' });
    opened.push(s);
    return s;
  };
  const raw = (name = 'q.db') => new Database(join(dir, name), { readonly: true });
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'ferry-sqlite-flow-'));
  });
  afterEach(async () => {
    for (const s of opened.splice(0)) await s.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  describe('pause', () => {
    it('a pause set through one handle stops the claims of another on the same file; its acks still land; resuming wakes it', async () => {
      const [a, b] = [await open(), await open()];
      await a.ensureGroup('t', 'g', 'earliest');
      const m = [1, 2, 3].map((i) => msg('t', { id: `m${i}` }));
      await a.append(m);
      const first = await b.claim(claimReq('t', 'g', { max: 1 }));
      assert.deepEqual(ids(first), ['m1']);

      assert.equal(await a.setGroupPaused('t', 'g', true), true);
      assert.equal(await a.setGroupPaused('t', 'other', true), false); // not registered: nothing stored
      assert.deepEqual(await b.claim(claimReq('t', 'g')), []);
      const both = await b.ackAndClaim(first, claimReq('t', 'g'));
      assert.deepEqual(both, { acked: [first[0]!.deliveryId], claimed: [] });
      assert.deepEqual(await b.duePairs(pair), []);
      // Past MANY_PAIRS the poll walks every group (due-groups.sql): the paused one is left out there too.
      const many = [...pair, ...Array.from({ length: MANY_PAIRS }, (_, i) => ({ topic: 't', group: `idle${i}` }))];
      assert.deepEqual(await b.duePairs(many), []);
      const st = await b.stats('t', 'g');
      assert.deepEqual([counts(st), st.paused], [{ pending: 2, leased: 0, dead: 0 }, true]);
      await a.append([msg('t', { id: 'm4' })]); // publishing goes on
      assert.deepEqual(await b.claim(claimReq('t', 'g')), []);

      const woken: string[] = [];
      const stop = new AbortController();
      const listening = b.listen(stop.signal, (topic) => woken.push(topic));
      try {
        assert.equal(await a.setGroupPaused('t', 'g', false), true);
        await waitFor(() => woken.includes('t'), 5000, 'the resume to wake the other handle');
      } finally {
        stop.abort();
        await listening;
      }
      assert.equal((await b.stats('t', 'g')).paused, false);
      assert.deepEqual(await b.duePairs(pair), pair);
      assert.deepEqual(await b.duePairs(many), pair);
      assert.deepEqual(ids(await b.claim(claimReq('t', 'g'))), ['m2', 'm3', 'm4']);
    });

    it('a claim already under way when the group is paused leases nothing: each of its transactions reads the flag', async () => {
      const [a, b] = [await open(), await open()];
      await a.ensureGroup('t', 'g', 'earliest');
      // 6,000 messages scheduled an hour ahead, then a due one: the claim looks
      // for it in several transactions, a turn of the event loop apart.
      const later = new Date(Date.now() + HOUR);
      for (let i = 0; i < 6000; i += 1000) await a.append(Array.from({ length: 1000 }, (_, j) => msg('t', { id: `s${i + j}`, deliverAt: later })));
      await a.append([msg('t', { id: 'due' })]);

      const claiming = b.claim(claimReq('t', 'g', { max: 1 })); // its first transaction ran already
      const cursorAfterFirst = raw().prepare(`SELECT cursor_seq FROM ferry_groups`).pluck().get() as number;
      assert.ok(cursorAfterFirst > 0 && cursorAfterFirst < 6001, `the first transaction stopped at ${cursorAfterFirst}`);
      assert.equal(await a.setGroupPaused('t', 'g', true), true);
      assert.deepEqual(await orHang(claiming, 'the claim'), []);

      await a.setGroupPaused('t', 'g', false);
      assert.deepEqual(ids(await orHang(b.claim(claimReq('t', 'g', { max: 1 })), 'the claim after resuming')), ['due']);
    });

    it('pause, resume, claims, stats and close at once on two handles end in the state of the last write', async () => {
      const [a, b] = [await open(), await open()];
      await a.ensureGroup('t', 'g', 'earliest');
      await a.append([msg('t', { id: 'm1' }), msg('t', { id: 'm2' })]);
      // Each call's transaction runs when it is called (better-sqlite3 is synchronous), so the order of the array is the order of the writes.
      const [paused, claimedWhilePaused, st, resumed, claimed] = await Promise.all([
        a.setGroupPaused('t', 'g', true), b.claim(claimReq('t', 'g', { max: 1 })), b.stats('t', 'g'), b.setGroupPaused('t', 'g', false), b.claim(claimReq('t', 'g', { max: 1 })),
      ]);
      assert.deepEqual([paused, claimedWhilePaused, st.paused, resumed, ids(claimed)], [true, [], true, true, ['m1']]);
      const [, , afterClose] = await Promise.allSettled([a.setGroupPaused('t', 'g', true), a.close(), a.setGroupPaused('t', 'g', false)]);
      assert.ok(afterClose.status === 'rejected' && afterClose.reason instanceof ClosedError);
      assert.equal((await b.stats('t', 'g')).paused, true);
      assert.deepEqual(await b.claim(claimReq('t', 'g')), []);
    });
  });

  describe('priority', () => {
    it('holds across the lazy cursor: a raised message behind 10,000 without rows is claimed first, lowered ones last', async () => {
      const s = await open();
      await s.ensureGroup('t', 'g', 'earliest');
      for (let i = 0; i < 10_000; i += 1000) {
        const batch = Array.from({ length: 1000 }, (_, j) => msg('t', { id: `f${i + j}` }));
        if (i === 5000) batch.splice(500, 0, msg('t', { id: 'low', priority: -1 }));
        await s.append(batch);
      }
      await s.append([msg('t', { id: 'high', priority: 7 }), msg('t', { id: 'mid', priority: 3 }), msg('t', { id: 'flat' })]);
      const db = raw();
      const rows = db.prepare(`SELECT count(*) FROM ferry_deliveries`).pluck();
      assert.equal(rows.get(), 0);

      const high = await orHang(s.claim(claimReq('t', 'g', { max: 1 })), 'the first claim');
      assert.deepEqual([ids(high), high[0]!.message.priority], [['high'], 7]);
      assert.ok((rows.get() as number) >= 10_003); // every row up to the newest raised message
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g', { max: 1 }))), ['mid']);
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g', { max: 3 }))), ['f0', 'f1', 'f2']);
      const rest = ids(await s.claim(claimReq('t', 'g', { max: 20_000 })));
      assert.deepEqual(rest, [...Array.from({ length: 9997 }, (_, i) => `f${i + 3}`), 'flat', 'low']);
      db.close();
    });

    it('a topic without raised messages makes no rows ahead of its claims', async () => {
      const s = await open();
      await s.ensureGroup('t', 'g', 'earliest');
      await s.append(Array.from({ length: 5000 }, (_, i) => msg('t', { id: `f${i}`, priority: i === 2500 ? -5 : 0 })));
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g', { max: 1 }))), ['f0']);
      const db = raw();
      assert.ok((db.prepare(`SELECT count(*) FROM ferry_deliveries`).pluck().get() as number) <= 1024);
      db.close();
    });

    it('keyed lanes keep publish order: a raised message waits behind its lane, a lane head competes by its own priority', async () => {
      const s = await open();
      await s.ensureGroup('t', 'g', 'earliest');
      await s.append([
        msg('t', { id: 'k1', key: 'k' }), msg('t', { id: 'k2', key: 'k', priority: 9 }), msg('t', { id: 'u', priority: 5 }),
        msg('t', { id: 'j1', key: 'j', priority: 2 }), msg('t', { id: 'j2', key: 'j', priority: 8 }),
      ]);
      const got = await s.claim(claimReq('t', 'g'));
      assert.deepEqual(ids(got), ['u', 'j1', 'k1']);
      await s.ack(got.filter((c) => c.message.id !== 'u'));
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g'))), ['k2', 'j2']);
    });

    it('a recovered delivery is claimed alone, at its place in priority order', async () => {
      const s = await open();
      await s.ensureGroup('t', 'g', 'earliest');
      await s.append([msg('t', { id: 'r' })]);
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g', { leaseMs: 1 }))), ['r']);
      await waitFor(async () => (await s.duePairs(pair)).length === 1, 5000, 'the lease to run out');
      await s.append([msg('t', { id: 'z' }), msg('t', { id: 'hi', priority: 5 })]);
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g'))), ['hi']); // stops before the recovered one
      const alone = await s.claim(claimReq('t', 'g'));
      assert.deepEqual([ids(alone), alone[0]!.recovered, alone[0]!.attempt], [['r'], true, 2]);
      assert.deepEqual(ids(await s.claim(claimReq('t', 'g'))), ['z']);
    });
  });

  describe('rate limit', () => {
    it('claims at once from two handles on one file start at most max per window; retries count; removeGroup forgets the record', async () => {
      const [a, b] = [await open(), await open()];
      await a.ensureGroup('t', 'g', 'earliest');
      await a.append(Array.from({ length: 40 }, (_, i) => msg('t', { id: `m${i}` })));
      const rateLimit = { max: 5, intervalMs: HOUR };
      const req = claimReq('t', 'g', { max: 4, rateLimit });
      const got = (await Promise.all([a.claim(req), b.claim(req), a.claim(req), b.ackAndClaim([], req), b.claim(req), a.claim(req)])).flatMap((r) => ('claimed' in r ? r.claimed : r));
      assert.equal(got.length, 5);
      assert.equal(new Set(ids(got)).size, 5);
      assert.deepEqual(await b.claim(req), []);
      assert.equal((await b.stats('t', 'g')).pending, 35);

      // A retry's next attempt is a start too.
      await a.ensureGroup('t', 'h', 'earliest');
      const hreq = claimReq('t', 'h', { max: 2, rateLimit: { max: 3, intervalMs: HOUR } });
      const two = await b.claim(hreq);
      assert.equal(two.length, 2);
      assert.equal(await b.retry(two[0]!, 0, 'again'), true);
      const third = await a.claim(hreq);
      assert.deepEqual(ids(third), [two[0]!.message.id]);
      assert.deepEqual(await a.claim(hreq), []);

      assert.equal(await a.removeGroup('t', 'h'), true);
      await a.ensureGroup('t', 'h', 'earliest');
      assert.equal((await b.claim(hreq)).length, 2);
    });

    it('every window of intervalMs holds at most max claim starts, by the database clock, across two handles', async () => {
      const [a, b] = [await open(), await open()];
      await a.ensureGroup('t', 'g', 'earliest');
      await a.append(Array.from({ length: 100 }, (_, i) => msg('t', { id: `m${i}` })));
      const rateLimit = { max: 3, intervalMs: 150 };
      const req = claimReq('t', 'g', { max: 2, leaseMs: HOUR, rateLimit });
      let total = 0;
      await orHang((async () => {
        while (total < 24) {
          total += (await Promise.all([a.claim(req), b.claim(req)])).reduce((n, r) => n + r.length, 0);
          await sleep(5);
        }
      })(), '24 claims');
      const db = raw();
      // A lease runs from its claim's start: lease_until = start + leaseMs.
      const starts = (db.prepare(`SELECT lease_until FROM ferry_deliveries WHERE state = 1 /* leased */ ORDER BY lease_until`).pluck().all() as number[]).map((u) => u - HOUR);
      assert.equal(starts.length, total);
      for (let i = 0; i + rateLimit.max < starts.length; i++) {
        assert.ok(starts[i + rateLimit.max]! - starts[i]! >= rateLimit.intervalMs, `claims ${i}..${i + rateLimit.max} started within ${starts[i + rateLimit.max]! - starts[i]!} ms`);
      }
      // Each claim prunes what left the window: the record never holds more than one window.
      assert.ok((db.prepare(`SELECT count(*) FROM ferry_claim_starts`).pluck().get() as number) <= rateLimit.max);
      db.close();
    });
  });

  it('a version 5 file is migrated to version 6 keeping every row, claim and schedule; then pause and priority work on it', async () => {
    // fixtures/sqlite-v5.db, written by the version 5 store: the data of
    // fixtures/sqlite-v4.db (topic `jobs`, groups `workers` and `audit`; topic
    // `late`, group `tail`) plus schedule `nightly` (advanced once) and
    // `pulse` (never fired).
    const p = join(dir, 'v5.db');
    copyFileSync(fixtureV5, p);
    const before = new Database(p, { readonly: true });
    assert.equal(before.pragma('user_version', { simple: true }), 5);
    const tables = ['ferry_messages', 'ferry_groups', 'ferry_deliveries', 'ferry_schedules', 'ferry_meta'];
    const rows0 = Object.fromEntries(tables.map((t) => [t, before.prepare(`SELECT * FROM ${t} ORDER BY 1, 2`).all() as Array<Record<string, unknown>>]));
    const aToken = before.prepare(`SELECT claim_token FROM ferry_deliveries WHERE state = 1 /* leased */`).pluck().get() as string;
    before.close();

    const s = await SqliteStore.open({ path: p });
    opened.push(s);
    const after = new Database(p, { readonly: true });
    assert.equal(after.pragma('user_version', { simple: true }), SCHEMA_VERSION);
    for (const t of tables) {
      const now = after.prepare(`SELECT * FROM ${t} ORDER BY 1, 2`).all() as Array<Record<string, unknown>>;
      assert.deepEqual(now.map((r, i) => Object.fromEntries(Object.keys(rows0[t]![i]!).map((k) => [k, r[k]]))), rows0[t], t);
      // New columns start at their defaults: running, priority 0.
      for (const r of now) for (const col of ['paused', 'priority']) if (col in r) assert.equal(r[col], 0, `${t}.${col}`);
    }
    after.close();
    assert.deepEqual((await s.listSchedules()).map((r) => [r.name, r.revision, r.lastTick?.toISOString()]), [['nightly', 'rev-1', '2026-06-02T01:00:00.000Z'], ['pulse', 'rev-9', undefined]]);

    // workers: a leased for a century (its old claim still fenced), b behind it, e scheduled, f released.
    assert.deepEqual(ids(await s.claim(claimReq('jobs', 'workers'))), ['f']);
    const a: Claimed = { deliveryId: deliveryId('a', 'workers'), claimToken: aToken, group: 'workers', attempt: 1, message: { id: 'a', topic: 'jobs', payload: new Uint8Array(), publishedAt: new Date() } };
    assert.deepEqual(await s.ack([a]), [a.deliveryId]);
    // A raised message published now goes ahead of audit's backlog, which has no rows yet.
    await s.append([msg('jobs', { id: 'urgent', priority: 5 })]);
    assert.deepEqual(ids(await s.claim(claimReq('jobs', 'audit', { max: 1 }))), ['urgent']);
    assert.deepEqual(ids(await s.claim(claimReq('jobs', 'audit'))), ['a', 'c', 'd', 'f']);
    assert.deepEqual(ids(await s.claim(claimReq('jobs', 'workers'))), ['urgent', 'b']);
    assert.equal(await s.setGroupPaused('late', 'tail', true), true);
    assert.equal((await s.stats('late', 'tail')).paused, true);
    assert.deepEqual(await s.claim(claimReq('late', 'tail')), []);
    assert.equal(await s.setGroupPaused('late', 'tail', false), true);
    assert.deepEqual(ids(await s.claim(claimReq('late', 'tail'))), ['l2']);
  });
});
