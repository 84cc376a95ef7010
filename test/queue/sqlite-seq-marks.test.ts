/**
 * Schema version 7 of the SQLite store: no index of messages by due time
 * (a publish writes one page fewer), the janitor walks messages in seq order
 * up to a mark it records at each purge (ferry_seq_marks). A database of
 * version 6 (fixtures/sqlite-v6.db, written by the version 6 store: topic
 * `jobs`, group `workers` from the earliest; a acked, b leased until 2099 (the lease the store wrote, an hour, was moved out so the fixture does not age)
 * on key k1, c pending behind it, d scheduled for 2099; topic `other`, no
 * group, message e) is migrated keeping every row (its messages get marks
 * by minute of publish time), and the janitor deletes what it deleted
 * before. On a new file, an acked message stays for the retention, then goes.
 */
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { SCHEMA_VERSION } from '../../src/queue/stores/sqlite/migrate.js';
import { SqliteStore } from '../../src/queue/stores/sqlite/store.js';
import { counts } from '../stores/helpers.js';

const fixtureV6 = join(import.meta.dirname, 'fixtures', 'sqlite-v6.db');
const enc = (s: string) => new TextEncoder().encode(s);
const req = { topic: 'jobs', group: 'workers', runnerId: 'new', max: 100, leaseMs: 60_000, maxInFlight: 0 };
const HOUR = 3_600_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function read<T>(path: string, fn: (db: Database.Database) => T): T {
  const db = new Database(path, { readonly: true });
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

describe('sqlite store: schema version 7 (the janitor walks by seq up to its marks)', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'ferry-sqlite-marks-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('migrates a version 6 database keeping its rows, and purges what version 6 purged', async () => {
    const path = join(dir, 'v6.db');
    copyFileSync(fixtureV6, path);
    const rows0 = read(path, (db) => {
      assert.equal(db.pragma('user_version', { simple: true }), 6);
      return db.prepare(`SELECT seq, id, topic, msg_key, payload, headers, published_at, deliver_at, due_at, priority FROM ferry_messages ORDER BY seq`).all();
    });
    assert.equal(rows0.length, 5);

    const s = await SqliteStore.open({ path });
    try {
      read(path, (db) => {
        assert.equal(db.pragma('user_version', { simple: true }), SCHEMA_VERSION);
        assert.deepEqual(db.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'ferry_messages' ORDER BY name`).pluck().all(),
          ['ferry_messages_raised', 'ferry_messages_topic', 'sqlite_autoindex_ferry_messages_1']);
        const minute = Math.floor((rows0[0] as { published_at: number }).published_at / 60_000);
        assert.deepEqual(db.prepare(`SELECT at, seq FROM ferry_seq_marks`).all(), [{ at: (minute + 1) * 60_000, seq: 5 }]); // all five published at once
        assert.deepEqual(db.prepare(`SELECT seq, id, topic, msg_key, payload, headers, published_at, deliver_at, due_at, priority FROM ferry_messages ORDER BY seq`).all(), rows0);
      });

      // Within the retention nothing goes; past it, a (acked) and e (a topic without groups) go; b, c and d are live.
      assert.equal(await s.purge({ deadRetentionMs: HOUR, ackedRetentionMs: 1000 * 365 * 24 * HOUR }, 100), 0);
      await sleep(2); // a's ack and e's publish lie before the cutoff of the next purge
      assert.equal(await s.purge({ deadRetentionMs: HOUR, ackedRetentionMs: 0 }, 100), 2);
      assert.deepEqual(read(path, (db) => db.prepare(`SELECT id FROM ferry_messages ORDER BY seq`).pluck().all()), ['b', 'c', 'd']);
      assert.deepEqual(counts(await s.stats('jobs', 'workers')), { pending: 2, leased: 1, dead: 0 });

      // Publishing goes on past the old seqs; c still waits behind b on k1, d for 2099.
      await s.append([{ id: 'f', topic: 'jobs', payload: enc('f'), publishedAt: new Date() }]);
      assert.equal(read(path, (db) => db.prepare(`SELECT seq FROM ferry_messages WHERE id = 'f'`).pluck().get()), 6);
      assert.deepEqual((await s.claim(req)).map((c) => c.message.id), ['f']);
    } finally {
      await s.close();
    }
  });

  it('keeps an acked message for the retention, then deletes it', async () => {
    const path = join(dir, 'new.db');
    const s = await SqliteStore.open({ path });
    try {
      await s.ensureGroup('jobs', 'workers', 'earliest');
      await s.append([{ id: 'm', topic: 'jobs', payload: enc('m'), publishedAt: new Date() }]);
      const claimed = await s.claim(req);
      assert.deepEqual(claimed.map((c) => c.message.id), ['m']);
      assert.equal((await s.ack(claimed)).length, 1);
      // Within the retention (40 s here) m stays; once its ack is older than the retention (40 ms here), it goes.
      assert.equal(await s.purge({ deadRetentionMs: HOUR, ackedRetentionMs: 40_000 }, 100), 0);
      await sleep(60);
      assert.equal(await s.purge({ deadRetentionMs: HOUR, ackedRetentionMs: 40 }, 100), 1);
      assert.equal(read(path, (db) => db.prepare(`SELECT count(*) FROM ferry_messages`).pluck().get()), 0);
      // Marks at or before the cutoff are forgotten: a purge at retention 0 leaves none.
      assert.equal(await s.purge({ deadRetentionMs: HOUR, ackedRetentionMs: 0 }, 100), 0);
      assert.equal(read(path, (db) => db.prepare(`SELECT count(*) FROM ferry_seq_marks`).pluck().get()), 0);
    } finally {
      await s.close();
    }
  });
});
