/**
 * Migration 10 drops the foreign key from deliveries to messages, so the
 * statements keep "no delivery names a message that is gone" themselves:
 * the janitor chooses and locks messages (purge-victims.sql), then deletes
 * each only if a newer snapshot shows it still has no delivery and no
 * recent ack (purge-messages.sql); a backfill locks the messages it reads
 * FOR KEY SHARE. Checked here: the migration from a schema at migration 9
 * with rows of every kind; a backfill holding its lock keeps the janitor
 * off its messages; a delivery committed after the choice keeps its
 * message; and purges run at once with `earliest` groups' backfills never
 * leave a delivery without its message.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { migrate } from '../../src/queue/stores/postgres/migrate.js';
import { statements } from '../../src/queue/stores/postgres/sql.js';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import type { Claimed } from '../../src/queue/types.js';
import { claimReq, ids, msg } from '../stores/helpers.js';
import { POSTGRES_SKIP, POSTGRES_URL, adminPool, dropSchema, testSchema } from '../stores/postgres-env.js';

/** Published an hour ago, so only its acks keep it from the janitor. */
const old = (topic: string, id: string) => msg(topic, { id, publishedAt: new Date(Date.now() - 3_600_000) });
const policy = { deadRetentionMs: 3_600_000, ackedRetentionMs: 0 };

async function orphans(s: string): Promise<number> {
  const r = await adminPool.query(`SELECT count(*)::int AS n FROM ${s}.deliveries d WHERE NOT EXISTS (SELECT 1 FROM ${s}.messages m WHERE m.seq = d.message_seq)`);
  return r.rows[0].n as number;
}

async function foreignKeys(schema: string): Promise<number> {
  const r = await adminPool.query(
    `SELECT count(*)::int AS n FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = $1 AND c.contype = 'f'`,
    [schema],
  );
  return r.rows[0].n as number;
}

describe('postgres store: migration 10 (no foreign key from deliveries to messages) from a schema at migration 9', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('mig10');
  const s = `"${schema}"`;
  let store: PostgresStore | undefined;
  after(async () => {
    await store?.close();
    await dropSchema(schema);
  });

  it('keeps every row, drops the key, and the work and the janitor carry on', async () => {
    assert.equal(await migrate(adminPool, schema, s, 9), 9);
    assert.equal(await foreignKeys(schema), 1);
    await adminPool.query(`INSERT INTO ${s}.topics VALUES ('t')`);
    await adminPool.query(`INSERT INTO ${s}.groups (topic, grp) VALUES ('t', 'g')`);
    // As migration 9's statements wrote them: 'done' acked an hour ago, 'live' pending, 'dead' dead-lettered.
    for (const [id, state] of [['done', 2], ['live', 0], ['dead', 3]] as const) {
      const seq = (await adminPool.query<{ seq: string }>(
        `INSERT INTO ${s}.messages (id, topic, payload, published_at, due_at) VALUES ($1, 't', $2, now() - interval '2 hours', now() - interval '2 hours') RETURNING seq`,
        [id, Buffer.from(id)],
      )).rows[0]!.seq;
      if (state === 2) await adminPool.query(`INSERT INTO ${s}.acks (message_seq, finished_at) VALUES ($1, now() - interval '1 hour')`, [seq]);
      else {
        await adminPool.query(
          `INSERT INTO ${s}.deliveries (delivery_id, message_seq, topic, grp, state, attempt, available_at, finished_at, last_error)
           VALUES ($1::text || '/g', $2, 't', 'g', $3::smallint, $3::smallint / 3, '-infinity', CASE WHEN $3::smallint = 3 THEN now() END, CASE WHEN $3::smallint = 3 THEN 'failed' END)`,
          [id, seq, state],
        );
      }
    }
    const snapshot = async () =>
      (await adminPool.query(`SELECT m.id, d.delivery_id, d.state FROM ${s}.messages m LEFT JOIN ${s}.deliveries d ON d.message_seq = m.seq ORDER BY m.seq`)).rows;
    const before = await snapshot();
    store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 2 });
    const versions = (await adminPool.query(`SELECT version FROM ${s}.migrations ORDER BY version`)).rows.map((r) => r.version);
    assert.deepEqual(versions, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
    assert.equal(await foreignKeys(schema), 0);
    assert.deepEqual(await snapshot(), before, 'every message and delivery as it was');
    // The janitor takes the acked message only: the others still have rows.
    assert.equal(await store.purge({ deadRetentionMs: 3_600_000, ackedRetentionMs: 60_000 }, 100), 1);
    assert.deepEqual((await adminPool.query(`SELECT id FROM ${s}.messages ORDER BY seq`)).rows.map((r) => r.id), ['live', 'dead']);
    assert.equal((await adminPool.query(`SELECT count(*)::int AS n FROM ${s}.acked_spans`)).rows[0].n, 0, 'its ack record (a span since migration 13) is past the retention and gone');
    await store.append([msg('t', { id: 'new' })]);
    const claimed = await store.claim(claimReq('t', 'g'));
    assert.deepEqual(ids(claimed), ['live', 'new']);
    assert.equal((await store.ack(claimed)).length, 2);
    assert.equal(await orphans(s), 0);
  });
});

describe('postgres store: the janitor beside backfills, without a foreign key', { skip: POSTGRES_SKIP }, () => {
  const schemas: string[] = [];
  const stores: PostgresStore[] = [];
  after(async () => {
    for (const st of stores) await st.close();
    for (const schema of schemas) await dropSchema(schema);
  });
  const open = async (tag: string) => {
    const schema = testSchema(tag);
    schemas.push(schema);
    const store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 4 });
    stores.push(store);
    return { store, schema, s: `"${schema}"` };
  };
  /** Messages `names` on topic t, handled by group g and acked: each is then the janitor's to take. */
  const finished = async (store: PostgresStore, names: string[]) => {
    await store.ensureGroup('t', 'g', 'latest');
    await store.append(names.map((n) => old('t', n)));
    const claimed = await store.claim(claimReq('t', 'g', { max: names.length }));
    assert.equal((await store.ack(claimed)).length, names.length);
  };

  it('a backfill holding its lock keeps the janitor off its message, and its delivery keeps the message', async () => {
    const { store, s } = await open('pbf1');
    await finished(store, ['a', 'b']);
    const client = await adminPool.connect();
    try {
      // A backfill of message 'a' for a new group, as backfill.sql runs it, not yet committed.
      await client.query('BEGIN');
      const locked = await client.query(`SELECT seq FROM ${s}.messages WHERE id = 'a' FOR KEY SHARE`);
      await client.query(
        `INSERT INTO ${s}.deliveries (delivery_id, message_seq, topic, grp, state, available_at) VALUES ('a/late', $1, 't', 'late', 0, '-infinity')`,
        [locked.rows[0].seq],
      );
      assert.equal(await store.purge(policy, 100), 1, "only 'b': 'a' is locked");
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    assert.equal(await store.purge(policy, 100), 0, "'a' has a delivery now");
    assert.deepEqual((await adminPool.query(`SELECT id FROM ${s}.messages ORDER BY seq`)).rows.map((r) => r.id), ['a']);
    assert.equal(await orphans(s), 0);
  });

  it('a delivery committed after the janitor chose its message keeps the message (the delete sees it)', async () => {
    const { store, schema, s } = await open('pbf2');
    await finished(store, ['a', 'b']);
    const q = statements(s);
    const client = await adminPool.connect();
    try {
      await client.query('BEGIN');
      const victims = (await client.query<{ seq: string }>(q['purge-victims'], [0, 100])).rows.map((r) => r.seq);
      assert.equal(victims.length, 2);
      // As if a backfill had committed between the choice's snapshot and its lock (the lock now keeps any later one out).
      await adminPool.query(
        `INSERT INTO ${s}.deliveries (delivery_id, message_seq, topic, grp, state, available_at) VALUES ('a/late', $1, 't', 'late', 0, '-infinity')`,
        [victims[0]],
      );
      const gone = await client.query<{ n: number }>(q['purge-messages'], [victims, 0]);
      assert.equal(gone.rows[0]!.n, 1);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    assert.deepEqual((await adminPool.query(`SELECT id FROM ${s}.messages ORDER BY seq`)).rows.map((r) => r.id), ['a']);
    // One span records both acks; it goes by age alone (purge-acked-spans.sql), and still covers 'a'.
    assert.deepEqual((await adminPool.query(`SELECT count(*)::int AS n FROM ${s}.acked_spans a JOIN ${s}.messages m ON int8range(a.first_seq, a.last_seq, '[]') @> m.seq`)).rows[0].n, 1, "'a' keeps its ack record");
    assert.equal(await orphans(s), 0, schema);
  });

  it('acks of two groups and purges at once: a message goes only after both groups acked it, once, and every span of acks is spent and gone at the end', async () => {
    const { store, schema, s } = await open('pbf4');
    const janitor = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 4 });
    stores.push(janitor);
    await store.ensureGroup('t', 'g', 'latest');
    await store.ensureGroup('t', 'h', 'latest');
    await store.append(Array.from({ length: 200 }, (_, i) => old('t', `m${i}`)));
    const g = await store.claim(claimReq('t', 'g', { max: 200 }));
    const h = await store.claim(claimReq('t', 'h', { max: 200 }));
    assert.deepEqual([g.length, h.length], [200, 200]);
    const chunks = (cs: Claimed[]) => Array.from({ length: 4 }, (_, i) => cs.slice(i * 50, i * 50 + 50));
    const results = await Promise.all([
      ...chunks(g).map((c) => store.ack(c).then((held) => (assert.equal(held.length, c.length), 0))),
      ...chunks(h).map((c) => store.ack(c).then((held) => (assert.equal(held.length, c.length), 0))),
      ...Array.from({ length: 4 }, () => janitor.purge(policy, 100)),
    ]);
    assert.equal(await orphans(s), 0, 'no delivery outlived its message');
    let purged = results.reduce((a, b) => a + b, 0);
    for (;;) {
      const n = await janitor.purge(policy, 100);
      if (n === 0) break;
      purged += n;
    }
    assert.equal(purged, 200, 'each message purged once');
    assert.equal((await adminPool.query(`SELECT count(*)::int AS n FROM ${s}.acked_spans`)).rows[0].n, 0);
  });

  it('purges run at once with earliest groups being created: no delivery loses its message, and each group gets exactly the messages kept', async () => {
    const { store, schema, s } = await open('pbf3');
    // The janitor on a store of its own, so its calls wait for no connection the backfills hold.
    const janitor = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 4 });
    stores.push(janitor);
    const names = Array.from({ length: 300 }, (_, i) => `m${i}`);
    await finished(store, names);
    // Four new earliest groups and three purges of 100, all at once, a purge first.
    const late = ['l1', 'l2', 'l3', 'l4'];
    const results = await Promise.all(
      late.flatMap((g, i) => [...(i < 3 ? [janitor.purge(policy, 100)] : []), store.ensureGroup('t', g, 'earliest').then(() => 0)]),
    );
    const purged = results.reduce((a, b) => a + b, 0);
    assert.equal(await orphans(s), 0);
    const kept = (await adminPool.query(`SELECT id FROM ${s}.messages ORDER BY seq`)).rows.map((r) => r.id as string);
    assert.equal(kept.length + purged, names.length);
    // A message the janitor kept was read by every backfill (each read all
    // 300) and then locked by it, or waited for the janitor to keep it: each
    // group has every kept message, in publish order.
    for (const g of late) assert.deepEqual(ids(await store.claim(claimReq('t', g, { max: 1000 }))), kept, g);
    // What the groups hold the janitor leaves; the rest it takes.
    await store.purge(policy, 1000);
    assert.equal(await orphans(s), 0);
  });
});
