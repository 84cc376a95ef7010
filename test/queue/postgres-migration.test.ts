/**
 * Migration 6 (pause, rate limits, priorities) on a schema as ferry left it
 * at migration 5: built by migrations 1 to 5 alone, with rows written as
 * that version wrote them (pending, keyed, leased with an expired lease,
 * dead, acked, a schedule, two groups). Opening the store migrates it in
 * place: nothing is lost, every group runs, every row has priority 0, the
 * pending index orders by priority, and the old work is claimed in publish
 * order with the key lane and the recovered-alone rule kept, before work
 * published afterwards with a priority.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { IOError } from '../../src/errors.js';
import { migrate } from '../../src/queue/stores/postgres/migrate.js';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import type { Claimed } from '../../src/queue/types.js';
import { claimReq, ids, msg } from '../stores/helpers.js';
import { POSTGRES_SKIP, POSTGRES_URL, adminPool, dropSchema, primaryKeyOf, testSchema } from '../stores/postgres-env.js';

describe('postgres store: migration 6 from a schema at migration 5', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('mig6');
  const s = `"${schema}"`;
  let store: PostgresStore | undefined;
  after(async () => {
    await store?.close();
    await dropSchema(schema);
  });

  it('keeps every row, leaves groups running at priority 0, and its work carries on in order', async () => {
    assert.equal(await migrate(adminPool, schema, s, 5), 5);
    // Rows as migration 5's statements wrote them, in publish order:
    // p1 pending, k1 and k2 on key k, lost leased with an expired lease,
    // d1 dead, p2 pending; a1 acked (its row gone, a record in acks). Group
    // h has p1 only.
    await adminPool.query(`INSERT INTO ${s}.topics VALUES ('t')`);
    await adminPool.query(`INSERT INTO ${s}.groups (topic, grp) VALUES ('t', 'g'), ('t', 'h')`);
    const rows: Array<[id: string, key: string | null, state: number, leaseMsAgo: number | null]> = [
      ['a1', null, -1, null],
      ['p1', null, 0, null],
      ['k1', 'k', 0, null],
      ['k2', 'k', 0, null],
      ['lost', null, 1, 5000],
      ['d1', null, 3, null],
      ['p2', null, 0, null],
    ];
    for (const [id, key, state, leaseMsAgo] of rows) {
      const seq = (await adminPool.query<{ seq: string }>(
        `INSERT INTO ${s}.messages (id, topic, msg_key, payload, published_at, due_at) VALUES ($1, 't', $2, $3, now(), now()) RETURNING seq`,
        [id, key, Buffer.from(id)],
      )).rows[0]!.seq;
      if (state === -1) {
        await adminPool.query(`INSERT INTO ${s}.acks (message_seq, finished_at) VALUES ($1, now())`, [seq]);
        continue;
      }
      await adminPool.query(
        `INSERT INTO ${s}.deliveries (delivery_id, message_seq, topic, grp, msg_key, state, attempt, available_at, lease_until, claim_token, holder, finished_at, last_error)
         VALUES ($1::text || '/g', $2::bigint, 't', 'g', $3::text, $4::smallint, CASE WHEN $4::smallint = 0 THEN 0 ELSE 1 END, '-infinity',
                 now() - $5::int * interval '1 millisecond',
                 CASE WHEN $4::smallint = 1 THEN gen_random_uuid() END, CASE WHEN $4::smallint = 1 THEN 'gone' END,
                 CASE WHEN $4::smallint = 3 THEN now() END, CASE WHEN $4::smallint = 3 THEN 'failed' END)`,
        [id, seq, key, state, leaseMsAgo],
      );
      if (id === 'p1') {
        await adminPool.query(`INSERT INTO ${s}.deliveries (delivery_id, message_seq, topic, grp, state, available_at) VALUES ('p1/h', $1, 't', 'h', 0, '-infinity')`, [seq]);
      }
    }
    await adminPool.query(
      `INSERT INTO ${s}.schedules (name, revision, spec, payload, updated_at) VALUES ('beat', 'r1', '{"everyMs":1000,"topic":"t","catchUp":"latest"}', '\\x00', now())`,
    );
    const snapshot = async () =>
      (await adminPool.query(
        `SELECT d.delivery_id, d.state, d.attempt, d.msg_key, d.lease_until, d.last_error, m.id, m.payload
         FROM ${s}.deliveries d JOIN ${s}.messages m ON m.seq = d.message_seq ORDER BY d.delivery_id`,
      )).rows;
    const before = await snapshot();

    store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 2 });
    const versions = (await adminPool.query(`SELECT version FROM ${s}.migrations ORDER BY version`)).rows.map((r) => r.version);
    assert.deepEqual(versions, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
    assert.deepEqual(await snapshot(), before, 'every delivery as it was');
    assert.equal((await adminPool.query(`SELECT count(*)::int AS n FROM ${s}.acked_spans`)).rows[0].n, 1);
    assert.equal((await adminPool.query(`SELECT count(*)::int AS n FROM ${s}.messages`)).rows[0].n, 7);
    assert.deepEqual((await store.listSchedules()).map((x) => x.name), ['beat']);
    const flags = await adminPool.query(
      `SELECT (SELECT array_agg(paused ORDER BY grp) FROM ${s}.groups) AS paused,
              (SELECT array_agg(DISTINCT priority) FROM ${s}.messages) AS messages,
              (SELECT array_agg(DISTINCT priority) FROM ${s}.deliveries) AS deliveries`,
    );
    assert.deepEqual(flags.rows[0], { paused: [false, false], messages: [0], deliveries: [0] });
    const index = await adminPool.query<{ def: string }>(`SELECT indexdef AS def FROM pg_indexes WHERE schemaname = $1 AND indexname = 'deliveries_pending'`, [schema]);
    assert.match(index.rows[0]!.def, /\(topic, grp, priority DESC, message_seq\) WHERE \(\(state = 0\) AND \(msg_key IS NULL\)\)$/); // as migration 7 left it
    const st = await store.stats('t', 'g');
    assert.deepEqual([st.pending, st.leased, st.dead, st.paused], [5, 0, 1, false]);

    // Published after the upgrade, with a priority: claimed before the old work.
    await store.append([msg('t', { id: 'urgent', priority: 1 })]);
    const claims: string[][] = [];
    for (let i = 0; i < 10; i++) {
      const cs: Claimed[] = await store.claim(claimReq('t', 'g', { rateLimit: { max: 1000, intervalMs: 1000 } }));
      if (cs.length === 0) break;
      claims.push(ids(cs));
      await store.ack(cs);
    }
    // urgent first; then p1 and k1, stopping before the recovered lost; then
    // k2 (its lane head acked, and published before lost), lost alone, p2.
    assert.deepEqual(claims, [['urgent', 'p1', 'k1'], ['k2'], ['lost'], ['p2']]);
    assert.deepEqual(ids(await store.claim(claimReq('t', 'h'))), ['urgent', 'p1']);
    assert.equal(await store.setGroupPaused('t', 'h', true), true);
    assert.equal((await store.stats('t', 'h')).paused, true);
    assert.equal((await store.stats('t', 'g')).paused, false);
  });
});

describe('postgres store: migration 7 (pending index split into unkeyed and keyed) from a schema at migration 6', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('mig7');
  const s = `"${schema}"`;
  let store: PostgresStore | undefined;
  after(async () => {
    await store?.close();
    await dropSchema(schema);
  });

  it('keeps every row, and the keyed and unkeyed work claims in publish order with each lane held to its head', async () => {
    assert.equal(await migrate(adminPool, schema, s, 6), 6);
    await adminPool.query(`INSERT INTO ${s}.topics VALUES ('t')`);
    await adminPool.query(`INSERT INTO ${s}.groups (topic, grp) VALUES ('t', 'g')`);
    // As migration 6's statements wrote them: key a's head leased (lease
    // running), a2 behind it; key b's b1 and b2 pending, published key-major;
    // u1 and u2 unkeyed, u2 at priority 1; x dead.
    const rows: Array<[id: string, key: string | null, state: number, priority: number]> = [
      ['a1', 'a', 1, 0],
      ['a2', 'a', 0, 0],
      ['u1', null, 0, 0],
      ['b1', 'b', 0, 0],
      ['b2', 'b', 0, 0],
      ['x', null, 3, 0],
      ['u2', null, 0, 1],
    ];
    for (const [id, key, state, priority] of rows) {
      const seq = (await adminPool.query<{ seq: string }>(
        `INSERT INTO ${s}.messages (id, topic, msg_key, payload, published_at, due_at, priority) VALUES ($1, 't', $2, $3, now(), now(), $4) RETURNING seq`,
        [id, key, Buffer.from(id), priority],
      )).rows[0]!.seq;
      await adminPool.query(
        `INSERT INTO ${s}.deliveries (delivery_id, message_seq, topic, grp, msg_key, state, attempt, available_at, lease_until, claim_token, holder, finished_at, last_error, priority)
         VALUES ($1::text || '/g', $2::bigint, 't', 'g', $3::text, $4::smallint, CASE WHEN $4::smallint = 0 THEN 0 ELSE 1 END, '-infinity',
                 CASE WHEN $4::smallint = 1 THEN now() + interval '1 hour' END,
                 CASE WHEN $4::smallint = 1 THEN gen_random_uuid() END, CASE WHEN $4::smallint = 1 THEN 'other' END,
                 CASE WHEN $4::smallint = 3 THEN now() END, CASE WHEN $4::smallint = 3 THEN 'failed' END, $5)`,
        [id, seq, key, state, priority],
      );
    }
    const snapshot = async () =>
      (await adminPool.query(`SELECT delivery_id, state, attempt, msg_key, lease_until, priority FROM ${s}.deliveries ORDER BY delivery_id`)).rows;
    const before = await snapshot();
    store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 2 });
    const versions = (await adminPool.query(`SELECT version FROM ${s}.migrations ORDER BY version`)).rows.map((r) => r.version);
    assert.deepEqual(versions, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
    assert.deepEqual(await snapshot(), before, 'every delivery as it was');
    const st = await store.stats('t', 'g');
    assert.deepEqual([st.pending, st.leased, st.dead], [5, 1, 1]);
    // u2 (priority 1) first, then u1 and b1 in publish order; a2 waits for
    // a1 (held elsewhere), b2 for b1.
    const keyedIndex = await adminPool.query<{ def: string }>(`SELECT indexdef AS def FROM pg_indexes WHERE schemaname = $1 AND indexname = 'deliveries_pending_keyed'`, [schema]);
    assert.match(keyedIndex.rows[0]!.def, /\(topic, grp, priority DESC, message_seq\) WHERE \(\(state = 0\) AND \(msg_key IS NOT NULL\) AND \(NOT blocked\)\)$/);
    const first = await store.claim(claimReq('t', 'g'));
    assert.deepEqual(ids(first), ['u2', 'u1', 'b1']);
    assert.deepEqual(await store.retry(first[2]!, 0, 'again'), true);
    const second = await store.claim(claimReq('t', 'g'));
    assert.deepEqual(ids(second), ['b1'], 'a retried head keeps its lane');
    const third = await store.ackAndClaim(second, claimReq('t', 'g'));
    assert.deepEqual(ids(third.claimed), ['b2']);
    assert.deepEqual(await store.claim(claimReq('t', 'g')), []);
  });
});

describe('postgres store: migration 8 (topics.groups_version, kept by a trigger on groups) from a schema at migration 7', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('mig8');
  const s = `"${schema}"`;
  let store: PostgresStore | undefined;
  after(async () => {
    await store?.close();
    await dropSchema(schema);
  });

  it('keeps every row, starts each topic at version 0, counts every later group change, and appends fan out to the groups of before', async () => {
    assert.equal(await migrate(adminPool, schema, s, 7), 7);
    await adminPool.query(`INSERT INTO ${s}.topics VALUES ('t'), ('u')`);
    await adminPool.query(`INSERT INTO ${s}.groups (topic, grp) VALUES ('t', 'g'), ('t', 'h')`);
    const seq = (await adminPool.query<{ seq: string }>(
      `INSERT INTO ${s}.messages (id, topic, payload, published_at, due_at) VALUES ('old', 't', '\\x6f6c64', now(), now()) RETURNING seq`,
    )).rows[0]!.seq;
    await adminPool.query(`INSERT INTO ${s}.deliveries (delivery_id, message_seq, topic, grp, state, available_at) VALUES ('old/g', $1, 't', 'g', 0, '-infinity')`, [seq]);
    store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 2 });
    const versions = (await adminPool.query(`SELECT version FROM ${s}.migrations ORDER BY version`)).rows.map((r) => r.version);
    assert.deepEqual(versions, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
    const topicVersions = async () => (await adminPool.query(`SELECT topic, groups_version::text AS v FROM ${s}.topics ORDER BY topic`)).rows;
    assert.deepEqual(await topicVersions(), [{ topic: 't', v: '0' }, { topic: 'u', v: '0' }]);
    await store.append([msg('t', { id: 'new' })]);
    assert.deepEqual(ids(await store.claim(claimReq('t', 'g'))), ['old', 'new']);
    assert.deepEqual(ids(await store.claim(claimReq('t', 'h'))), ['new']);
    // Each change of t's groups sets a version t never had.
    const seen = new Set(['0']);
    const changed = async () => {
      const v = (await topicVersions())[0]!.v as string;
      assert.ok(!seen.has(v), `version ${v} again`);
      seen.add(v);
    };
    await store.ensureGroup('t', 'k', 'latest');
    await changed();
    await store.ensureGroup('t', 'k', 'latest'); // exists: no change
    assert.equal(seen.has((await topicVersions())[0]!.v as string), true);
    assert.equal(await store.removeGroup('t', 'h'), true);
    await changed();
    assert.equal((await topicVersions())[1]!.v, '0');
    await store.append([msg('t', { id: 'later' })]);
    assert.deepEqual(ids(await store.claim(claimReq('t', 'k'))), ['later']);
    assert.equal((await adminPool.query(`SELECT count(*)::int AS n FROM ${s}.deliveries WHERE grp = 'h'`)).rows[0].n, 0);
  });
});

describe('postgres store: migration 9 (keyed rows behind their head flagged blocked) from a schema at migration 8', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('mig9');
  const s = `"${schema}"`;
  let store: PostgresStore | undefined;
  after(async () => {
    await store?.close();
    await dropSchema(schema);
  });

  it('keeps every row, flags exactly the live keyed rows behind a head, and each ack or dead letter moves its lane on', async () => {
    assert.equal(await migrate(adminPool, schema, s, 8), 8);
    await adminPool.query(`INSERT INTO ${s}.topics VALUES ('t')`);
    await adminPool.query(`INSERT INTO ${s}.groups (topic, grp) VALUES ('t', 'g')`);
    // As migration 8's statements wrote them, in publish order: key a's head
    // a1 leased elsewhere (lease running), a2 and a3 behind it; b1 and b2
    // pending; c1 dead, so c2 leads its lane; u1 unkeyed.
    const rows: Array<[id: string, key: string | null, state: number]> = [
      ['a1', 'a', 1],
      ['a2', 'a', 0],
      ['u1', null, 0],
      ['b1', 'b', 0],
      ['c1', 'c', 3],
      ['b2', 'b', 0],
      ['c2', 'c', 0],
      ['a3', 'a', 0],
    ];
    for (const [id, key, state] of rows) {
      const seq = (await adminPool.query<{ seq: string }>(
        `INSERT INTO ${s}.messages (id, topic, msg_key, payload, published_at, due_at) VALUES ($1, 't', $2, $3, now(), now()) RETURNING seq`,
        [id, key, Buffer.from(id)],
      )).rows[0]!.seq;
      await adminPool.query(
        `INSERT INTO ${s}.deliveries (delivery_id, message_seq, topic, grp, msg_key, state, attempt, available_at, lease_until, claim_token, holder, finished_at, last_error)
         VALUES ($1::text || '/g', $2::bigint, 't', 'g', $3::text, $4::smallint, CASE WHEN $4::smallint = 0 THEN 0 ELSE 1 END, '-infinity',
                 CASE WHEN $4::smallint = 1 THEN now() + interval '1 hour' END,
                 CASE WHEN $4::smallint = 1 THEN gen_random_uuid() END, CASE WHEN $4::smallint = 1 THEN 'other' END,
                 CASE WHEN $4::smallint = 3 THEN now() END, CASE WHEN $4::smallint = 3 THEN 'failed' END)`,
        [id, seq, key, state],
      );
    }
    const snapshot = async () =>
      (await adminPool.query(`SELECT delivery_id, state, attempt, msg_key, lease_until FROM ${s}.deliveries ORDER BY delivery_id`)).rows;
    const before = await snapshot();
    store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 2 });
    const versions = (await adminPool.query(`SELECT version FROM ${s}.migrations ORDER BY version`)).rows.map((r) => r.version);
    assert.deepEqual(versions, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
    assert.deepEqual(await snapshot(), before, 'every delivery as it was');
    const blocked = async () =>
      (await adminPool.query<{ id: string }>(`SELECT delivery_id AS id FROM ${s}.deliveries WHERE blocked ORDER BY delivery_id`)).rows.map((r) => r.id);
    assert.deepEqual(await blocked(), ['a2/g', 'a3/g', 'b2/g']);

    const first = await store.claim(claimReq('t', 'g'));
    assert.deepEqual(ids(first), ['u1', 'b1', 'c2'], 'heads and unkeyed work in publish order; a2 waits for a1');
    // A dead letter moves its lane on as an ack does.
    assert.equal(await store.kill(first[1]!, 'poison'), true);
    assert.deepEqual(await blocked(), ['a2/g', 'a3/g']);
    assert.deepEqual(ids(await store.claim(claimReq('t', 'g'))), ['b2']);
    // a1's holder is gone: its lease runs out, it is claimed alone, and its
    // ack frees a2 (claimed by the same statement), whose ack frees a3.
    await adminPool.query(`UPDATE ${s}.deliveries SET lease_until = now() - interval '1 second' WHERE delivery_id = 'a1/g'`);
    const a1 = await store.claim(claimReq('t', 'g'));
    assert.deepEqual(ids(a1), ['a1']);
    const a2 = await store.ackAndClaim(a1, claimReq('t', 'g'));
    assert.deepEqual(ids(a2.claimed), ['a2']);
    assert.deepEqual(await blocked(), ['a3/g']);
    assert.deepEqual((await store.ack(a2.claimed)).length, 1);
    assert.deepEqual(await blocked(), []);
    assert.deepEqual(ids(await store.claim(claimReq('t', 'g'))), ['a3']);
  });
});

describe('postgres store: migration 11 (an ack-and-claim clears the flags of the lanes it moves on) from a schema at migration 10', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('mig11');
  const s = `"${schema}"`;
  let store: PostgresStore | undefined;
  after(async () => {
    await store?.close();
    await dropSchema(schema);
  });

  it('each lane an ack-and-claim or an ack moves on leads with its next row, claimed or not', async () => {
    assert.equal(await migrate(adminPool, schema, s, 10), 10);
    await adminPool.query(`INSERT INTO ${s}.topics VALUES ('t')`);
    await adminPool.query(`INSERT INTO ${s}.groups (topic, grp) VALUES ('t', 'g'), ('t', 'h')`);
    // As migration 10's append wrote a batch, in publish order: lanes a and b
    // of group g, lane c of group h, each head marked blocks_next and the
    // rows behind it flagged; b2 is due only in an hour.
    const rows: Array<[id: string, grp: string, key: string, blocked: boolean, blocksNext: boolean, later?: true]> = [
      ['a1', 'g', 'a', false, true],
      ['b1', 'g', 'b', false, true],
      ['c1', 'h', 'c', false, true],
      ['a2', 'g', 'a', true, true],
      ['b2', 'g', 'b', true, false, true],
      ['c2', 'h', 'c', true, false],
      ['a3', 'g', 'a', true, false],
    ];
    for (const [id, grp, key, blocked, blocksNext, later] of rows) {
      const seq = (await adminPool.query<{ seq: string }>(
        `INSERT INTO ${s}.messages (id, topic, msg_key, payload, published_at, due_at) VALUES ($1, 't', $2, $3, now(), now()) RETURNING seq`,
        [id, key, Buffer.from(id)],
      )).rows[0]!.seq;
      await adminPool.query(
        `INSERT INTO ${s}.deliveries (delivery_id, message_seq, topic, grp, msg_key, state, available_at, blocked, blocks_next)
         VALUES ($1::text || '/' || $2::text, $3::bigint, 't', $2::text, $4::text, 0, CASE WHEN $7 THEN now() + interval '1 hour' ELSE '-infinity' END, $5, $6)`,
        [id, grp, seq, key, blocked, blocksNext, later === true],
      );
    }
    store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 2 });
    const versions = (await adminPool.query(`SELECT version FROM ${s}.migrations ORDER BY version`)).rows.map((r) => r.version);
    assert.deepEqual(versions, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
    const blocked = async () =>
      (await adminPool.query<{ id: string }>(`SELECT delivery_id AS id FROM ${s}.deliveries WHERE blocked ORDER BY delivery_id`)).rows.map((r) => r.id);

    const heads = await store.claim(claimReq('t', 'g'));
    assert.deepEqual(ids(heads), ['a1', 'b1']);
    const c1 = await store.claim(claimReq('t', 'h'));
    assert.deepEqual(ids(c1), ['c1']);
    // One statement acks a1, b1 and c1: it claims a2, the one freed row of
    // g that is due; b2 (not due) and c2 (group h) lead their lanes unclaimed.
    const moved = await store.ackAndClaim([...heads, ...c1], claimReq('t', 'g'));
    assert.equal(moved.acked.length, 3);
    assert.deepEqual(ids(moved.claimed), ['a2']);
    assert.deepEqual(await blocked(), ['a3/g']);
    assert.deepEqual(ids(await store.claim(claimReq('t', 'h'))), ['c2']);
    // A plain ack moves its lane on too.
    assert.equal((await store.ack(moved.claimed)).length, 1);
    assert.deepEqual(await blocked(), []);
    assert.deepEqual(ids(await store.claim(claimReq('t', 'g'))), ['a3']);
    await adminPool.query(`UPDATE ${s}.deliveries SET available_at = now() - interval '1 second' WHERE delivery_id = 'b2/g'`);
    assert.deepEqual(ids(await store.claim(claimReq('t', 'g'))), ['b2']);
  });
});

describe('postgres store: migration 12 (deliveries keyed by message) from a schema at migration 11', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('mig12');
  const s = `"${schema}"`;
  let store: PostgresStore | undefined;
  after(async () => {
    await store?.close();
    await dropSchema(schema);
  });

  it('keeps every row; a claim token from before finds nothing held, its delivery runs again once its lease ends, and lanes move on by their new key', async () => {
    assert.equal(await migrate(adminPool, schema, s, 11), 11);
    await adminPool.query(`INSERT INTO ${s}.topics VALUES ('t')`);
    await adminPool.query(`INSERT INTO ${s}.groups (topic, grp) VALUES ('t', 'g'), ('t', 'h')`);
    // As migration 11's statements wrote them, in publish order. Group g: p1
    // pending; held leased by a live instance (lease running) and lost by a
    // gone one (lease over), both under tokens of the old form; lane k with
    // k2 flagged behind k1; d1 dead. Group h: p1 pending; lane j with j2
    // flagged behind j1.
    const oldToken = '6a0b7c7e-1f0d-4a8e-9a53-0c1d2e3f4a5b';
    const rows: Array<[id: string, grp: string, key: string | null, state: number, leaseMs: number | null, blocked: boolean, blocksNext: boolean]> = [
      ['p1', 'g', null, 0, null, false, false],
      ['p1', 'h', null, 0, null, false, false],
      ['held', 'g', null, 1, 3_600_000, false, false],
      ['lost', 'g', null, 1, -1000, false, false],
      ['k1', 'g', 'k', 0, null, false, true],
      ['k2', 'g', 'k', 0, null, true, false],
      ['j1', 'h', 'j', 0, null, false, true],
      ['j2', 'h', 'j', 0, null, true, false],
      ['d1', 'g', null, 3, null, false, false],
    ];
    const seqs = new Map<string, string>();
    for (const [id, grp, key, state, leaseMs, blocked, blocksNext] of rows) {
      if (!seqs.has(id)) {
        const seq = (await adminPool.query<{ seq: string }>(
          `INSERT INTO ${s}.messages (id, topic, msg_key, payload, published_at, due_at) VALUES ($1, 't', $2, $3, now(), now()) RETURNING seq`,
          [id, key, Buffer.from(id)],
        )).rows[0]!.seq;
        seqs.set(id, seq);
      }
      await adminPool.query(
        `INSERT INTO ${s}.deliveries (delivery_id, message_seq, topic, grp, msg_key, state, attempt, available_at, lease_until, claim_token, holder,
                                      finished_at, last_error, blocked, blocks_next)
         VALUES ($1::text || '/' || $2::text, $3::bigint, 't', $2::text, $4::text, $5::smallint, CASE WHEN $5::smallint = 0 THEN 0 ELSE 1 END, '-infinity',
                 now() + $6::int * interval '1 millisecond',
                 CASE WHEN $5::smallint = 1 THEN $9::uuid END, CASE WHEN $5::smallint = 1 THEN 'other' END,
                 CASE WHEN $5::smallint = 3 THEN now() END, CASE WHEN $5::smallint = 3 THEN 'failed' END, $7, $8)`,
        [id, grp, seqs.get(id), key, state, leaseMs, blocked, blocksNext, oldToken],
      );
    }
    const snapshot = async () =>
      (await adminPool.query(`SELECT * FROM ${s}.deliveries ORDER BY delivery_id`)).rows;
    const before = await snapshot();
    store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 2 });
    const versions = (await adminPool.query(`SELECT version FROM ${s}.migrations ORDER BY version`)).rows.map((r) => r.version);
    assert.deepEqual(versions, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
    assert.deepEqual(await snapshot(), before, 'every delivery as it was');
    assert.deepEqual(await primaryKeyOf(schema, 'deliveries'), ['message_seq', 'grp']);
    const gone = await adminPool.query(`SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relname = 'deliveries_message'`, [schema]);
    assert.equal(gone.rowCount, 0);
    const blocked = async () =>
      (await adminPool.query<{ id: string }>(`SELECT delivery_id AS id FROM ${s}.deliveries WHERE blocked ORDER BY delivery_id`)).rows.map((r) => r.id);

    // The live instance's writes under its old token find nothing held, and change nothing.
    const held: Claimed = { deliveryId: 'held/g', claimToken: oldToken, group: 'g', attempt: 1, message: msg('t', { id: 'held' }) };
    assert.deepEqual(await store.ack([held]), []);
    assert.deepEqual(await store.extend([held], 60_000), []);
    assert.equal(await store.retry(held, 0, 'x'), false);
    assert.equal(await store.kill(held, 'x'), false);
    await store.release([held]);
    assert.deepEqual(await snapshot(), before, 'nothing written under the old token');

    // A DELETE that moves no lane on itself leaves it to the trigger, which finds j2 by its new key.
    await adminPool.query(`DELETE FROM ${s}.deliveries WHERE delivery_id = 'j1/h'`);
    assert.deepEqual(await blocked(), ['k2/g']);
    const h = await store.claim(claimReq('t', 'h'));
    assert.deepEqual(ids(h), ['p1', 'j2']);
    // New tokens name the message's seq, and fence as before.
    for (const c of h) assert.match(c.claimToken, new RegExp(`^${seqs.get(c.message.id)}/[0-9a-f-]{36}$`));
    assert.deepEqual((await store.ack([{ ...h[0]!, claimToken: `${seqs.get('p1')}/${oldToken}` }])), [], 'a token of the right seq and another claim is not held');
    assert.deepEqual((await store.ack(h)).sort(), ['j2/h', 'p1/h']);

    // Group g: p1 first; lost (lease over) alone, recovered; then the lane's head, whose dead letter frees k2.
    assert.deepEqual(ids(await store.claim(claimReq('t', 'g'))), ['p1']);
    const lost = await store.claim(claimReq('t', 'g'));
    assert.deepEqual([ids(lost), lost[0]?.recovered, lost[0]?.attempt], [['lost'], true, 2]);
    const k1 = await store.ackAndClaim(lost, claimReq('t', 'g'));
    assert.deepEqual([k1.acked, ids(k1.claimed)], [['lost/g'], ['k1']]);
    assert.equal(await store.kill(k1.claimed[0]!, 'poison'), true);
    assert.deepEqual(await blocked(), []);
    assert.deepEqual(ids(await store.claim(claimReq('t', 'g'))), ['k2']);
    // held's lease is the old instance's until it runs out; then it runs again here.
    await adminPool.query(`UPDATE ${s}.deliveries SET lease_until = now() - interval '1 second' WHERE delivery_id = 'held/g'`);
    const again = await store.claim(claimReq('t', 'g'));
    assert.deepEqual([ids(again), again[0]?.recovered], [['held'], true]);
    assert.deepEqual(await store.ack(again), ['held/g']);
    const st = await store.stats('t', 'g');
    assert.deepEqual([st.pending, st.leased, st.dead], [0, 2, 2]);
  });
});

describe('postgres store: migration 13 (acks recorded as spans of seqs) from a schema at migration 12', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('mig13');
  const s = `"${schema}"`;
  let store: PostgresStore | undefined;
  after(async () => {
    await store?.close();
    await dropSchema(schema);
  });
  const spans = async () =>
    (await adminPool.query<{ first: string; last: string }>(`SELECT first_seq::text AS first, last_seq::text AS last FROM ${s}.acked_spans ORDER BY first_seq, finished_at`)).rows.map((r) => [r.first, r.last]);
  const seqOf = async (id: string) => (await adminPool.query<{ seq: string }>(`SELECT seq::text FROM ${s}.messages WHERE id = $1`, [id])).rows[0]!.seq;

  it('keeps each ack record as a span of its one seq, and the janitor keeps a message while a span younger than the retention covers it', async () => {
    assert.equal(await migrate(adminPool, schema, s, 12), 12);
    await adminPool.query(`INSERT INTO ${s}.topics VALUES ('t')`);
    await adminPool.query(`INSERT INTO ${s}.groups (topic, grp) VALUES ('t', 'g')`);
    // As migration 12's statements wrote them: 'old' acked two hours ago, 'recent' a minute ago, 'live' pending.
    for (const [id, ackedAgo] of [['old', '2 hours'], ['recent', '1 minute'], ['live', null]] as const) {
      const seq = (await adminPool.query<{ seq: string }>(
        `INSERT INTO ${s}.messages (id, topic, payload, published_at, due_at) VALUES ($1, 't', $2, now() - interval '3 hours', now() - interval '3 hours') RETURNING seq`,
        [id, Buffer.from(id)],
      )).rows[0]!.seq;
      if (ackedAgo !== null) await adminPool.query(`INSERT INTO ${s}.acks (message_seq, finished_at) VALUES ($1, now() - $2::interval)`, [seq, ackedAgo]);
      else await adminPool.query(`INSERT INTO ${s}.deliveries (delivery_id, message_seq, topic, grp, state, available_at) VALUES ('live/g', $1, 't', 'g', 0, '-infinity')`, [seq]);
    }
    const before = (await adminPool.query(`SELECT message_seq::text AS seq, finished_at FROM ${s}.acks ORDER BY message_seq`)).rows;
    store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 2 });
    const versions = (await adminPool.query(`SELECT version FROM ${s}.migrations ORDER BY version`)).rows.map((r) => r.version);
    assert.deepEqual(versions, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]);
    const after13 = (await adminPool.query(`SELECT first_seq::text AS seq, last_seq::text AS last, finished_at FROM ${s}.acked_spans ORDER BY first_seq`)).rows;
    assert.deepEqual(after13, before.map((r) => ({ seq: r.seq, last: r.seq, finished_at: r.finished_at })), 'each record a span of its seq, its time kept');
    const tables = await adminPool.query(`SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'acks'`, [schema]);
    assert.equal(tables.rowCount, 0);

    // An hour's retention: 'old' goes, with its spent span; 'recent' stays, covered; 'live' has its delivery.
    assert.equal(await store.purge({ deadRetentionMs: 3_600_000, ackedRetentionMs: 3_600_000 }, 100), 1);
    assert.deepEqual((await adminPool.query(`SELECT id FROM ${s}.messages ORDER BY seq`)).rows.map((r) => r.id), ['recent', 'live']);
    assert.deepEqual(await spans(), [[await seqOf('recent'), await seqOf('recent')]]);
  });

  it('an ack writes a span per run of its seqs, split where the next is over 1,000 further on; ack-and-claim too; a message in a gap is kept', async () => {
    await store!.ensureGroup('t', 'g', 'latest');
    // The first test's 'live' is acked, and the spans so far are cleared: no span covers 'recent' or 'live' now.
    const live = await store!.claim(claimReq('t', 'g'));
    assert.deepEqual(ids(live), ['live']);
    assert.equal((await store!.ack(live)).length, 1);
    await adminPool.query(`TRUNCATE ${s}.acked_spans`);
    // a, then 1,001 messages of a topic without groups, then b, c: a's next acked seq is 1,002 on.
    await store!.append([msg('t', { id: 'a' })]);
    await store!.append(Array.from({ length: 1001 }, (_, i) => msg('other', { id: `o${i}` })));
    await store!.append([msg('t', { id: 'b' }), msg('t', { id: 'c' })]);
    const claimed = await store!.claim(claimReq('t', 'g'));
    assert.deepEqual(ids(claimed), ['a', 'b', 'c']);
    assert.equal((await store!.ack(claimed)).length, 3);
    const [a, b, c] = [await seqOf('a'), await seqOf('b'), await seqOf('c')];
    assert.deepEqual(await spans(), [[a, a], [b, c]]);
    // A keyed ack-and-claim (one statement) records its span too.
    await store!.append([msg('t', { id: 'k1', key: 'k' }), msg('t', { id: 'k2', key: 'k' })]);
    const k1 = await store!.claim(claimReq('t', 'g'));
    const step = await store!.ackAndClaim(k1, claimReq('t', 'g'));
    assert.deepEqual([step.acked.length, ids(step.claimed)], [1, ['k2']]);
    const k = await seqOf('k1');
    assert.deepEqual(await spans(), [[a, a], [b, c], [k, k]]);
    // a's span aged past a 30-minute retention: a goes, and so do 'recent',
    // 'live' and every message of the other topic (no span covers them); b,
    // c and k1 stay behind their young spans, and k2 is leased.
    await adminPool.query(`UPDATE ${s}.acked_spans SET finished_at = now() - interval '2 hours' WHERE first_seq = $1`, [a]);
    await adminPool.query(`UPDATE ${s}.messages SET due_at = now() - interval '2 hours'`);
    const purged = await store!.purge({ deadRetentionMs: 3_600_000, ackedRetentionMs: 1_800_000 }, 5000);
    const left = (await adminPool.query<{ id: string }>(`SELECT id FROM ${s}.messages ORDER BY seq`)).rows.map((r) => r.id);
    assert.deepEqual(left, ['b', 'c', 'k1', 'k2']);
    assert.equal(purged, 3 + 1001);
    assert.deepEqual(await spans(), [[b, c], [k, k]], "a's spent span went too");
  });
});

describe('postgres store: a schema a newer ferry migrated', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('newer');
  const s = `"${schema}"`;
  after(() => dropSchema(schema));

  it('is refused with an IOError that is not transient, and nothing in it changes', async () => {
    const at = await migrate(adminPool, schema, s);
    await adminPool.query(`INSERT INTO ${s}.migrations (version, name) VALUES ($1, 'from_the_future.sql')`, [at + 1]);
    await assert.rejects(PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 1 }), (err: unknown) => {
      assert.ok(err instanceof IOError, `an IOError, got ${String(err)}`);
      assert.match(err.message, new RegExp(`at version ${at + 1}, newer than this ferry's \\(${at}\\); upgrade ferry`));
      assert.equal(err.transient, false, 'a retry cannot mend it');
      return true;
    });
    const rows = await adminPool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${s}.migrations`);
    assert.equal(rows.rows[0]!.n, at + 1, 'no migration row added or removed');
  });
});
