/**
 * Schema version 8 of the SQLite store: a live keyed delivery behind an
 * earlier live one of its key is `blocked`, and the claim walks an index of
 * the others only (ferry_deliveries_heads), so a claim's cost does not grow
 * with the depth of a key's lane.
 *
 * A database of version 7 (fixtures/sqlite-v7.db, written by the version 7
 * store: topic `jobs`, groups `workers` and `audit` from the earliest;
 * messages a–d on key k1, e, f and p (priority 3) on k2, g and h on k3, i
 * unkeyed, j on k1 published after the last claim; for `workers` a acked, b
 * leased until 2099 (the store wrote an hour; moved out so the fixture does
 * not age), e dead, g retried until 2096, i released, the rest pending with
 * rows up to p; `audit` has no rows) is migrated keeping every row, with c,
 * d, h and p blocked, and its lanes go on in order. A property test checks
 * that `blocked` is exactly "an earlier live delivery of its key exists"
 * after any sequence of store calls. And an ack that moves a lane on wakes
 * the other handles on the file (a handle skips the wake-up when every
 * listener is its own).
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import fc from 'fast-check';
import { deliveryId } from '../../src/queue/delivery-id.js';
import { SCHEMA_VERSION } from '../../src/queue/stores/sqlite/migrate.js';
import { SqliteStore } from '../../src/queue/stores/sqlite/store.js';
import type { Claimed } from '../../src/queue/types.js';
import { claimReq, counts, ids, msg } from '../stores/helpers.js';

const fixtureV7 = join(import.meta.dirname, 'fixtures', 'sqlite-v7.db');
const enc = (s: string) => new TextEncoder().encode(s);

function read<T>(path: string, fn: (db: Database.Database) => T): T {
  const db = new Database(path, { readonly: true });
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

/** Every delivery row but the new column, in key order. */
const ROWS = `SELECT message_seq, grp, delivery_id, topic, msg_key, state, attempt, available_at, lease_until, claim_token, holder, last_error, finished_at, priority
  FROM ferry_deliveries ORDER BY message_seq, grp`;

/** The live rows whose `blocked` differs from its definition: keyed, with an earlier live row of the key. */
const WRONG = `SELECT d.message_seq, d.grp, d.msg_key, d.blocked FROM ferry_deliveries d
  WHERE d.state < 2 AND d.blocked <> (d.msg_key IS NOT NULL AND EXISTS (
    SELECT 1 FROM ferry_deliveries e WHERE e.topic = d.topic AND e.grp = d.grp AND e.msg_key = d.msg_key AND e.state < 2 AND e.message_seq < d.message_seq))`;

describe('sqlite store: schema version 8 (lane heads)', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'ferry-sqlite-heads-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('migrates a version 7 database keeping its rows, blocks the rows behind each lane head, and the lanes go on in order', async () => {
    const path = join(dir, 'v7.db');
    copyFileSync(fixtureV7, path);
    const [rows0, oldToken] = read(path, (db) => {
      assert.equal(db.pragma('user_version', { simple: true }), 7);
      return [db.prepare(ROWS).all(), db.prepare(`SELECT claim_token FROM ferry_deliveries WHERE delivery_id = ?`).pluck().get(deliveryId('b', 'workers')) as string];
    });
    assert.equal(rows0.length, 10);

    const s = await SqliteStore.open({ path });
    try {
      read(path, (db) => {
        assert.equal(db.pragma('user_version', { simple: true }), SCHEMA_VERSION);
        assert.deepEqual(db.prepare(ROWS).all(), rows0);
        assert.deepEqual(db.prepare(`SELECT m.id FROM ferry_deliveries d JOIN ferry_messages m ON m.seq = d.message_seq WHERE d.blocked = 1 ORDER BY d.message_seq`).pluck().all(), ['c', 'd', 'h', 'p']);
        assert.deepEqual(db.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'ferry_deliveries_%' ORDER BY name`).pluck().all(),
          ['ferry_deliveries_dead', 'ferry_deliveries_dead_age', 'ferry_deliveries_heads', 'ferry_deliveries_lane', 'ferry_deliveries_leased']);
      });
      // Live with rows: b (leased), c, d, f, g, h, i, p; j has no row yet; e dead.
      assert.deepEqual(counts(await s.stats('jobs', 'workers')), { pending: 8, leased: 1, dead: 1 });

      // b holds k1 (c, d and the new j wait), g holds k3 until 2096 (h waits), f heads k2 before the raised p.
      const req = claimReq('jobs', 'workers');
      const first = await s.claim(req);
      assert.deepEqual(ids(first), ['f', 'i']);
      await s.ack(first);
      const p = await s.claim(req);
      assert.deepEqual(ids(p), ['p']);
      await s.ack(p);
      assert.deepEqual(await s.claim(req), []);
      // The old claim on b still acks (its message carries no key: the lane moves on from the row's own key).
      const b: Claimed = { deliveryId: deliveryId('b', 'workers'), claimToken: oldToken, group: 'workers', attempt: 1, message: { id: 'b', topic: 'jobs', payload: enc('b'), publishedAt: new Date() } };
      assert.deepEqual(await s.ack([b]), [b.deliveryId]);
      const order: string[] = [];
      for (let c = await s.claim(req); c.length > 0; c = await s.claim(req)) {
        order.push(...ids(c));
        await s.ack(c);
      }
      assert.deepEqual(order, ['c', 'd', 'j']);
      assert.deepEqual(counts(await s.stats('jobs', 'workers')), { pending: 2, leased: 0, dead: 1 }); // g (until 2096) and h

      // audit had no rows: its claim makes them all, each lane blocked behind its head.
      const audit = claimReq('jobs', 'audit');
      const heads = await s.claim(audit);
      assert.deepEqual(ids(heads), ['a', 'e', 'g', 'i']);
      await s.ack(heads.filter((c) => c.message.id !== 'e'));
      await s.kill(heads.find((c) => c.message.id === 'e')!, 'boom');
      assert.deepEqual(ids(await s.claim(audit)), ['b', 'f', 'h']);
      assert.deepEqual(read(path, (db) => db.prepare(WRONG).all()), []);
    } finally {
      await s.close();
    }
  });

  it('a lane 1,000 deep puts one row in the claim index', async () => {
    const path = join(dir, 'deep.db');
    const s = await SqliteStore.open({ path, synchronous: 'normal' });
    try {
      await s.ensureGroup('t', 'g', 'earliest');
      await s.append(Array.from({ length: 1000 }, () => msg('t', { key: 'k' })));
      const order: string[] = [];
      const all = read(path, (db) => db.prepare(`SELECT id FROM ferry_messages ORDER BY seq`).pluck().all());
      for (let n = 0; n < 3; n++) {
        const c = await s.claim(claimReq('t', 'g', { max: 16 }));
        assert.equal(c.length, 1);
        order.push(...ids(c));
        const inIndex = read(path, (db) =>
          db.prepare(`SELECT count(*) FROM ferry_deliveries INDEXED BY ferry_deliveries_heads WHERE topic = 't' AND grp = 'g' AND state < 2 AND blocked = 0`).pluck().get());
        assert.equal(inIndex, 1);
        await s.ack(c);
      }
      assert.deepEqual(order, all.slice(0, 3));
    } finally {
      await s.close();
    }
  });

  it('an ack that moves a lane on wakes the other handles on the file, whether or not its own handle listens, and never itself', async () => {
    const path = join(dir, 'wake.db');
    const a = await SqliteStore.open({ path, synchronous: 'normal' });
    const b = await SqliteStore.open({ path, synchronous: 'normal' });
    const stop = new AbortController();
    try {
      await a.ensureGroup('t', 'g', 'earliest');
      await a.append([msg('t', { key: 'k' }), msg('t', { key: 'k' }), msg('t', { key: 'k' })]);
      const heardByA: string[] = [];
      const heardByB: string[] = [];
      const listeningB = b.listen(stop.signal, (topic) => heardByB.push(topic));
      await a.ack(await a.claim(claimReq('t', 'g')));
      assert.deepEqual(heardByB, ['t']);
      const listeningA = a.listen(stop.signal, (topic) => heardByA.push(topic));
      await a.ack(await a.claim(claimReq('t', 'g')));
      assert.deepEqual(heardByB, ['t', 't']);
      assert.deepEqual(heardByA, []);
      stop.abort();
      await Promise.all([listeningA, listeningB]);
      // With no listener left, an ack wakes no one.
      await a.ack(await a.claim(claimReq('t', 'g')));
      assert.deepEqual([heardByA.length, heardByB.length], [0, 2]);
    } finally {
      stop.abort();
      await a.close();
      await b.close();
    }
  });

  it('blocked is exactly "an earlier live delivery of its key exists" after any sequence of store calls', async () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('append' as const), keys: fc.array(fc.constantFrom(undefined, 'a', 'b', 'c'), { minLength: 1, maxLength: 6 }), priority: fc.constantFrom(0, 0, 0, 2, -1) }),
      fc.record({ kind: fc.constant('claim' as const), max: fc.integer({ min: 1, max: 5 }) }),
      fc.record({ kind: fc.constantFrom('ack' as const, 'kill' as const, 'retry' as const, 'release' as const), pick: fc.nat() }),
    );
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 40 }), async (ops) => {
        const path = join(dir, `prop-${run++}.db`);
        const s = await SqliteStore.open({ path, synchronous: 'normal' });
        const raw = new Database(path, { readonly: true });
        const wrong = raw.prepare(WRONG);
        try {
          await s.ensureGroup('t', 'g', 'earliest');
          let held: Claimed[] = [];
          for (const o of ops) {
            if (o.kind === 'append') {
              await s.append(o.keys.map((key) => msg('t', { key, priority: o.priority })));
            } else if (o.kind === 'claim') {
              const got = await s.claim(claimReq('t', 'g', { max: o.max }));
              const keys = got.flatMap((c) => (c.message.key === undefined ? [] : [c.message.key]));
              assert.equal(new Set(keys).size, keys.length, 'one delivery per lane at a time');
              for (const k of keys) assert.ok(!held.some((h) => h.message.key === k), `lane ${k} was held`);
              held.push(...got);
            } else if (held.length > 0) {
              const c = held[o.pick % held.length]!;
              held = held.filter((h) => h !== c);
              if (o.kind === 'ack') await s.ack([c]);
              else if (o.kind === 'kill') await s.kill(c, 'boom');
              else if (o.kind === 'retry') await s.retry(c, 0, 'again');
              else await s.release([c]);
            }
            assert.deepEqual(wrong.all(), []);
          }
        } finally {
          raw.close();
          await s.close();
          rmSync(path, { force: true });
        }
      }),
      { numRuns: 40 },
    );
  });
});
