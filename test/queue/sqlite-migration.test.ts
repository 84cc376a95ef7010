/**
 * A database made by the SQLite store before schema version 2
 * (fixtures/sqlite-v1.db, written by that code: topic `jobs` with groups
 * `workers` and `audit`; messages a–f, b and c on key k1, f scheduled for
 * 2099; for `workers` a acked, b leased for an hour, d dead, e released)
 * opens, is migrated once, and works: old claims stay fenced, delivery IDs
 * are unchanged, publishing fans out and stays idempotent.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { IOError } from '../../src/errors.js';
import { deliveryId } from '../../src/queue/delivery-id.js';
import { SCHEMA_VERSION } from '../../src/queue/stores/sqlite/migrate.js';
import { SqliteStore } from '../../src/queue/stores/sqlite/store.js';
import type { Claimed } from '../../src/queue/types.js';
import { counts } from '../stores/helpers.js';

const fixture = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'sqlite-v1.db');
const fixtureV2 = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'sqlite-v2.db');
const fixtureV3 = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'sqlite-v3.db');
const fixtureV4 = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'sqlite-v4.db');
const enc = (s: string) => new TextEncoder().encode(s);
const req = (group: string) => ({ topic: 'jobs', group, runnerId: 'new', max: 100, leaseMs: 60_000, maxInFlight: 0 });

describe('sqlite store: a database from an earlier schema version', () => {
  let dir: string;
  let path: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'ferry-sqlite-mig-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('is migrated on open and keeps every row, delivery ID and claim', async () => {
    path = join(dir, 'old.db');
    copyFileSync(fixture, path);
    const raw0 = new Database(path, { readonly: true });
    assert.equal(raw0.pragma('user_version', { simple: true }), 0);
    const oldToken = raw0.prepare(`SELECT claim_token FROM ferry_deliveries WHERE delivery_id = ?`).pluck().get(deliveryId('b', 'workers')) as string;
    raw0.close();
    assert.ok(oldToken);

    const s = await SqliteStore.open({ path });
    const raw = new Database(path, { readonly: true });
    assert.equal(raw.pragma('user_version', { simple: true }), SCHEMA_VERSION);
    assert.match(raw.prepare(`SELECT sql FROM sqlite_master WHERE name = 'ferry_deliveries'`).pluck().get() as string, /PRIMARY KEY \(message_seq, grp\)\s*\) WITHOUT ROWID/);
    assert.equal(raw.prepare(`SELECT count(*) FROM ferry_deliveries`).pluck().get(), 12);
    raw.close();

    // workers: b leased (or pending once its hour has passed), c, e, f live; d dead.
    const w = await s.stats('jobs', 'workers');
    assert.deepEqual([w.pending + w.leased, w.dead], [4, 1]);
    assert.deepEqual(counts(await s.stats('jobs', 'audit')), { pending: 6, leased: 0, dead: 0 });

    // The claim made by the old code is still fenced: a wrong token changes nothing, the right one acks.
    const b: Claimed = { deliveryId: deliveryId('b', 'workers'), claimToken: oldToken, group: 'workers', attempt: 1, message: { id: 'b', topic: 'jobs', payload: enc(''), publishedAt: new Date() } };
    assert.deepEqual(await s.ack([{ ...b, claimToken: 'stale' }]), []);
    assert.deepEqual(await s.ack([b]), [b.deliveryId]);

    // audit: due now are a, b, d, e (c waits behind b on k1, f is scheduled), with their old delivery IDs.
    const got = await s.claim(req('audit'));
    assert.deepEqual(got.map((c) => [c.message.id, c.deliveryId]), ['a', 'b', 'd', 'e'].map((id) => [id, deliveryId(id, 'audit')]));
    assert.deepEqual(new TextDecoder().decode(got[1]!.message.payload), 'payload b');
    assert.deepEqual(got[1]!.message.headers, { h: '1' });
    assert.equal(got[1]!.message.key, 'k1');
    assert.equal((await s.ack(got)).length, 4);
    assert.deepEqual((await s.claim(req('audit'))).map((c) => c.message.id), ['c']);

    // Publishing still fans out to both groups, and an existing ID is still a no-op.
    await s.append([{ id: 'a', topic: 'jobs', payload: enc('again'), publishedAt: new Date() }, { id: 'g', topic: 'jobs', payload: enc('new'), publishedAt: new Date() }]);
    assert.deepEqual((await s.claim(req('audit'))).map((c) => c.message.id), ['g']);
    const workers = await s.claim(req('workers'));
    assert.ok(workers.some((c) => c.message.id === 'g'));
    assert.ok(!workers.some((c) => c.message.id === 'a'));
    await s.close();

    // Opening it again finds it current and changes nothing.
    const again = await SqliteStore.open({ path });
    assert.deepEqual(counts(await again.stats('jobs', 'audit')), { pending: 1, leased: 2, dead: 0 }); // f scheduled; c and g claimed
    await again.close();
  });

  it('two stores opening the same old file at once migrate it once', async () => {
    const p = join(dir, 'race.db');
    copyFileSync(fixture, p);
    const [a, b] = await Promise.all([SqliteStore.open({ path: p }), SqliteStore.open({ path: p })]);
    assert.deepEqual(counts(await a.stats('jobs', 'audit')), { pending: 6, leased: 0, dead: 0 });
    assert.deepEqual(counts(await b.stats('jobs', 'audit')), { pending: 6, leased: 0, dead: 0 });
    await a.close();
    await b.close();
  });

  it('a version 2 database gets group cursors at its newest message and keeps every row, claim and start position', async () => {
    // fixtures/sqlite-v2.db, written by the version 2 store: topic `jobs` as in
    // the version 1 file; topic `other` with o1 published before group `late`
    // ('latest') and o2 after it.
    const p = join(dir, 'v2.db');
    copyFileSync(fixtureV2, p);
    const raw0 = new Database(p, { readonly: true });
    assert.equal(raw0.pragma('user_version', { simple: true }), 2);
    const oldToken = raw0.prepare(`SELECT claim_token FROM ferry_deliveries WHERE delivery_id = ?`).pluck().get(deliveryId('b', 'workers')) as string;
    const newest = raw0.prepare(`SELECT max(seq) FROM ferry_messages`).pluck().get() as number;
    raw0.close();
    assert.ok(oldToken);

    const s = await SqliteStore.open({ path: p });
    const raw = new Database(p, { readonly: true });
    assert.equal(raw.pragma('user_version', { simple: true }), SCHEMA_VERSION);
    assert.deepEqual(raw.prepare(`SELECT DISTINCT cursor_seq FROM ferry_groups`).pluck().all(), [newest]);
    assert.equal(raw.prepare(`SELECT count(*) FROM ferry_deliveries`).pluck().get(), 13);
    assert.equal(raw.pragma('page_size', { simple: true }), 4096); // an existing file keeps its page size
    raw.close();

    const w = await s.stats('jobs', 'workers');
    assert.deepEqual([w.pending + w.leased, w.dead], [4, 1]);
    assert.deepEqual(counts(await s.stats('jobs', 'audit')), { pending: 6, leased: 0, dead: 0 });
    assert.deepEqual(counts(await s.stats('other', 'late')), { pending: 1, leased: 0, dead: 0 });

    const b: Claimed = { deliveryId: deliveryId('b', 'workers'), claimToken: oldToken, group: 'workers', attempt: 1, message: { id: 'b', topic: 'jobs', payload: enc(''), publishedAt: new Date() } };
    assert.deepEqual(await s.ack([{ ...b, claimToken: 'stale' }]), []);
    assert.deepEqual(await s.ack([b]), [b.deliveryId]);
    assert.deepEqual((await s.claim(req('audit'))).map((c) => [c.message.id, c.deliveryId]), ['a', 'b', 'd', 'e'].map((id) => [id, deliveryId(id, 'audit')]));
    assert.deepEqual((await s.claim({ ...req('late'), topic: 'other' })).map((c) => c.message.id), ['o2']);

    // A new message reaches both groups through their cursors; a stored ID is still a no-op.
    await s.append([{ id: 'a', topic: 'jobs', payload: enc('again'), publishedAt: new Date() }, { id: 'g', topic: 'jobs', payload: enc('new'), publishedAt: new Date() }]);
    assert.deepEqual((await s.claim(req('audit'))).map((c) => c.message.id), ['g']);
    const workers = (await s.claim(req('workers'))).map((c) => c.message.id);
    assert.ok(workers.includes('g') && workers.includes('c') && !workers.includes('a'), workers.join());
    await s.close();
  });

  it('a version 3 database loses AUTOINCREMENT but never reuses the seq of a purged message', async () => {
    // fixtures/sqlite-v3.db, written by the version 3 store: topic `keep`
    // (group `slow`, cursor 0) with k1, k2 pending; topic `jobs` (group
    // `workers`, cursor 6) with a leased for a century, b (key x) pending,
    // and p1, p2 (seq 5 and 6, the newest) acked and purged. So
    // sqlite_sequence holds 6 while the newest stored seq is 4.
    const p = join(dir, 'v3.db');
    copyFileSync(fixtureV3, p);
    const raw0 = new Database(p, { readonly: true });
    assert.equal(raw0.pragma('user_version', { simple: true }), 3);
    assert.equal(raw0.prepare(`SELECT seq FROM sqlite_sequence WHERE name = 'ferry_messages'`).pluck().get(), 6);
    const rows0 = raw0.prepare(`SELECT seq, id, topic, msg_key, payload, headers, published_at, deliver_at, due_at FROM ferry_messages ORDER BY seq`).all();
    const aToken = raw0.prepare(`SELECT claim_token FROM ferry_deliveries WHERE delivery_id = ?`).pluck().get(deliveryId('a', 'workers')) as string;
    raw0.close();
    assert.equal(rows0.length, 4);
    assert.ok(aToken);

    const s = await SqliteStore.open({ path: p });
    const raw = new Database(p, { readonly: true });
    assert.equal(raw.pragma('user_version', { simple: true }), SCHEMA_VERSION);
    assert.doesNotMatch(raw.prepare(`SELECT sql FROM sqlite_master WHERE name = 'ferry_messages'`).pluck().get() as string, /AUTOINCREMENT/);
    assert.deepEqual(raw.prepare(`SELECT seq, id, topic, msg_key, payload, headers, published_at, deliver_at, due_at FROM ferry_messages ORDER BY seq`).all(), rows0);
    assert.deepEqual(raw.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'ferry_messages' ORDER BY name`).pluck().all(),
      ['ferry_messages_raised', 'ferry_messages_topic', 'sqlite_autoindex_ferry_messages_1']); // _raised: version 6; _due dropped by version 7
    assert.equal(raw.prepare(`SELECT value FROM ferry_meta WHERE name = 'purged_seq'`).pluck().get(), 6);
    raw.close();

    assert.deepEqual(counts(await s.stats('keep', 'slow')), { pending: 2, leased: 0, dead: 0 });
    assert.deepEqual(counts(await s.stats('jobs', 'workers')), { pending: 1, leased: 1, dead: 0 });
    // A new message on `jobs` is numbered past the purged 6, so the cursor at 6 still lets `workers` see it.
    await s.append([{ id: 'c', topic: 'jobs', payload: enc('new'), publishedAt: new Date() }, { id: 'b', topic: 'jobs', payload: enc('again'), publishedAt: new Date() }]);
    const check = new Database(p, { readonly: true });
    assert.equal(check.prepare(`SELECT seq FROM ferry_messages WHERE id = 'c'`).pluck().get(), 7);
    check.close();
    assert.deepEqual((await s.claim(req('workers'))).map((c) => c.message.id), ['b', 'c']);
    // The claim made by the version 3 code is still fenced.
    const a: Claimed = { deliveryId: deliveryId('a', 'workers'), claimToken: aToken, group: 'workers', attempt: 1, message: { id: 'a', topic: 'jobs', payload: enc(''), publishedAt: new Date() } };
    assert.deepEqual(await s.ack([{ ...a, claimToken: 'stale' }]), []);
    assert.deepEqual(await s.ack([a]), [a.deliveryId]);
    assert.deepEqual((await s.claim({ ...req('slow'), topic: 'keep' })).map((c) => c.message.id), ['k1', 'k2']);
    await s.close();
  });

  it('a version 4 database gains the schedules table and keeps every row, cursor and claim', async () => {
    // fixtures/sqlite-v4.db, written by the version 4 store: topic `jobs`
    // (messages a-f; a and b on key k1, e scheduled for 2099) with group
    // `workers` (cursor past f: a leased for a century, b pending behind it,
    // c acked, d dead, e scheduled, f released) and group `audit` (cursor 0,
    // no rows yet); topic `late` with l1 published before group `tail`
    // ('latest') and l2 after.
    const p = join(dir, 'v4.db');
    copyFileSync(fixtureV4, p);
    const raw0 = new Database(p, { readonly: true });
    assert.equal(raw0.pragma('user_version', { simple: true }), 4);
    const messages0 = raw0.prepare(`SELECT * FROM ferry_messages ORDER BY seq`).all();
    const groups0 = raw0.prepare(`SELECT * FROM ferry_groups ORDER BY topic, grp`).all();
    const deliveries0 = raw0.prepare(`SELECT * FROM ferry_deliveries ORDER BY message_seq, grp`).all();
    const aToken = raw0.prepare(`SELECT claim_token FROM ferry_deliveries WHERE delivery_id = ?`).pluck().get(deliveryId('a', 'workers')) as string;
    raw0.close();
    assert.ok(aToken);

    const s = await SqliteStore.open({ path: p });
    const raw = new Database(p, { readonly: true });
    assert.equal(raw.pragma('user_version', { simple: true }), SCHEMA_VERSION);
    // Every old row keeps its values (later versions only add columns, with defaults).
    const pick = (rows: unknown[], like: unknown[]) => rows.map((r, i) => Object.fromEntries(Object.keys(like[i] as object).map((k) => [k, (r as Record<string, unknown>)[k]])));
    assert.deepEqual(pick(raw.prepare(`SELECT * FROM ferry_messages ORDER BY seq`).all(), messages0), messages0);
    assert.deepEqual(pick(raw.prepare(`SELECT * FROM ferry_groups ORDER BY topic, grp`).all(), groups0), groups0);
    assert.deepEqual(pick(raw.prepare(`SELECT * FROM ferry_deliveries ORDER BY message_seq, grp`).all(), deliveries0), deliveries0);
    assert.equal(raw.prepare(`SELECT count(*) FROM ferry_schedules`).pluck().get(), 0);
    raw.close();

    assert.deepEqual(counts(await s.stats('jobs', 'workers')), { pending: 3, leased: 1, dead: 1 });
    assert.deepEqual(counts(await s.stats('jobs', 'audit')), { pending: 6, leased: 0, dead: 0 });
    assert.deepEqual(counts(await s.stats('late', 'tail')), { pending: 1, leased: 0, dead: 0 });

    // Schedules work on the migrated file.
    const sched = { name: 'nightly', revision: 'r1', spec: { everyMs: 60_000, topic: 'jobs', catchUp: 'none' as const }, payload: enc('tick'), updatedAt: new Date(1000) };
    assert.equal(await s.putSchedule!(sched), true);
    assert.equal(await s.advanceSchedule!('nightly', 'r1', new Date(60_000)), true);
    assert.deepEqual((await s.listSchedules!()).map((r) => [r.name, r.lastTick?.getTime()]), [['nightly', 60_000]]);

    // The old claim is still fenced; the lanes, cursors and the scheduled message are as they were.
    const a: Claimed = { deliveryId: deliveryId('a', 'workers'), claimToken: aToken, group: 'workers', attempt: 1, message: { id: 'a', topic: 'jobs', payload: enc(''), publishedAt: new Date() } };
    assert.deepEqual((await s.claim(req('workers'))).map((c) => c.message.id), ['f']); // b waits behind a on k1
    assert.deepEqual(await s.ack([{ ...a, claimToken: 'stale' }]), []);
    assert.deepEqual(await s.ack([a]), [a.deliveryId]);
    assert.deepEqual((await s.claim(req('workers'))).map((c) => c.message.id), ['b']);
    assert.deepEqual((await s.claim(req('audit'))).map((c) => [c.message.id, c.deliveryId]), ['a', 'c', 'd', 'f'].map((id) => [id, deliveryId(id, 'audit')]));
    assert.deepEqual((await s.claim({ ...req('tail'), topic: 'late' })).map((c) => c.message.id), ['l2']);
    await s.close();
  });

  it('what a retry cannot mend is an IOError that is not transient: a missing directory, a directory, a FIFO, a socket, a file that is not a database', async () => {
    for (const path of [join(dir, 'no-such-dir', 'x.db'), dir]) {
      await assert.rejects(SqliteStore.open({ path }), (err: unknown) => err instanceof IOError && err.transient === false, path);
    }
    // A FIFO: before, opening it held open(2), and the whole event loop, until a writer came.
    const fifo = join(dir, 'fifo.db');
    execFileSync('mkfifo', [fifo]);
    await assert.rejects(SqliteStore.open({ path: fifo }), (err: unknown) => err instanceof IOError && err.transient === false && /not a regular file \(a FIFO\)/.test(err.message));
    // A Unix socket: open(2) fails with ENXIO.
    const sock = join(dir, 'sock.db');
    const server = createServer().listen(sock);
    await once(server, 'listening');
    try {
      await assert.rejects(SqliteStore.open({ path: sock }), (err: unknown) => err instanceof IOError && err.transient === false && /not a regular file \(a socket\)/.test(err.message));
    } finally {
      server.close();
    }
    const notDb = join(dir, 'not-a-db.txt');
    writeFileSync(notDb, 'x'.repeat(8192));
    await assert.rejects(SqliteStore.open({ path: notDb }), (err: unknown) => err instanceof IOError && err.transient === false && /SQLITE_NOTADB|not a database/.test(`${err.message} ${String((err.cause as { code?: string })?.code)}`));
  });

  it("SQLite's side files (-wal, -shm, -journal) that are a FIFO or a directory are refused at open, naming them, not transient; the database stays", async () => {
    for (const side of ['-wal', '-shm', '-journal']) {
      for (const make of ['fifo', 'dir'] as const) {
        const p = join(dir, `side-${make}${side.replace('-', '_')}.db`);
        // An existing database, closed cleanly (its -wal and -shm removed), then the odd file beside it.
        const first = await SqliteStore.open({ path: p });
        await first.close();
        if (make === 'fifo') execFileSync('mkfifo', [p + side]);
        else mkdirSync(p + side);
        // Before: a FIFO -wal opened, then the first publish failed as a transient disk I/O error (and SQLite deleted the FIFO at close); a -shm directory read as "readonly database".
        await assert.rejects(SqliteStore.open({ path: p }), (err: unknown) => {
          assert.ok(err instanceof IOError && err.transient === false, String(err));
          assert.ok(err.message.includes(`${p + side} is not a regular file (${make === 'fifo' ? 'a FIFO' : 'a directory'})`), err.message);
          return true;
        }, `${make} ${side}`);
        assert.ok(statSync(p).isFile(), 'the database is left where it was');
      }
    }
    // A side file that is a symbolic link to nothing, beside a path with no database yet: refused, naming the link, and nothing is made.
    for (const side of ['-wal', '-shm']) {
      const p = join(dir, `side-dangling${side.replace('-', '_')}.db`);
      symlinkSync(join(dir, 'nowhere'), p + side);
      await assert.rejects(SqliteStore.open({ path: p }), (err: unknown) => {
        assert.ok(err instanceof IOError && err.transient === false, String(err));
        assert.ok(err.message.includes(`${p + side} is a symbolic link to ${join(dir, 'nowhere')}, which does not exist`), err.message);
        return true;
      });
      assert.equal(existsSync(p), false, 'no database file was made');
    }
  });

  it('a database from a newer ferry is refused with IOError, untouched', async () => {
    const p = join(dir, 'newer.db');
    const raw = new Database(p);
    raw.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    raw.close();
    await assert.rejects(SqliteStore.open({ path: p }), (err: unknown) => err instanceof IOError && /newer than this ferry/.test(err.message) && err.transient === false);
    const check = new Database(p, { readonly: true });
    assert.equal(check.pragma('user_version', { simple: true }), SCHEMA_VERSION + 1);
    assert.equal(check.prepare(`SELECT count(*) FROM sqlite_master`).pluck().get(), 0);
    check.close();
  });
});
