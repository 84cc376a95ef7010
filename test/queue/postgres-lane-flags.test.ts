/**
 * The `blocked` flag of keyed deliveries on Postgres (migration 9): an append
 * flags a row only behind an earlier row of its lane in the same batch, and
 * removing a lane's head clears the flag of the next. The order in which an
 * append and the ack of its lane's last live row commit is decided by the
 * test, not by timing: a test-only trigger makes one statement wait on an
 * advisory lock the test holds, after its rows are written and before it
 * commits, and the test waits until pg_blocking_pids shows that it waits.
 * Whichever commits first, the other neither waits for it nor strands a row
 * behind a head that is gone: the new row is claimed next, alone at the
 * head of its lane.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import pg from 'pg';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { claimReq, ids, msg } from '../stores/helpers.js';
import { POSTGRES_DIRECT_URL, POSTGRES_SKIP, POSTGRES_URL, adminPool, dropSchema, testSchema } from '../stores/postgres-env.js';

/** Resolves once `check` returns true, polling; rejects after a generous deadline (a hang, not a timing). */
async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('postgres store: lane flags when an append and an ack of the lane meet', { skip: POSTGRES_SKIP }, () => {
  let schema = '';
  let s = '';
  let store: PostgresStore | undefined;
  let holder: pg.Client | undefined;
  const lockKey = () => `ferry-test-hold:${schema}`;

  /** The backends waiting for a lock that backend `pid` holds (pg_blocking_pids: the statement text is cut at 1 KiB in pg_stat_activity, so it cannot tell them). */
  const blockedBy = async (pid: number) =>
    (await adminPool.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, [pid])).rows.map((r) => r.pid);
  let holderPid = 0;

  /** From now on, a statement inserting into `table` a row with id column `col` = `id` waits before it commits until `release`. */
  async function holdOn(table: string, col: string, id: string): Promise<void> {
    await adminPool.query(`CREATE FUNCTION ${s}.test_hold() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_advisory_xact_lock_shared(hashtext('${lockKey()}')); RETURN NULL; END $$`);
    await adminPool.query(`CREATE TRIGGER test_hold AFTER INSERT ON ${s}.${table} FOR EACH ROW WHEN (NEW.${col} = '${id}') EXECUTE FUNCTION ${s}.test_hold()`);
    holder = new pg.Client({ connectionString: POSTGRES_DIRECT_URL });
    await holder.connect();
    holderPid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    await holder.query('SELECT pg_advisory_lock(hashtext($1))', [lockKey()]);
  }
  const release = async () => {
    await holder?.query('SELECT pg_advisory_unlock(hashtext($1))', [lockKey()]);
  };
  const blocked = async () =>
    (await adminPool.query<{ id: string }>(`SELECT m.id FROM ${s}.deliveries d JOIN ${s}.messages m ON m.seq = d.message_seq WHERE d.blocked ORDER BY m.id`)).rows.map((r) => r.id);

  beforeEach(async () => {
    schema = testSchema('lanes');
    s = `"${schema}"`;
    store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 4 });
    await store.ensureGroup('t', 'g', 'latest');
  });
  afterEach(async () => {
    await holder?.end().catch(() => {});
    holder = undefined;
    await store?.close();
    store = undefined;
    await dropSchema(schema);
  });

  it('append held before its commit: the ack of the lane\'s last row does not wait for it, and the new row leads next', async () => {
    await store!.append([msg('t', { id: 'k1', key: 'k' })]);
    const first = await store!.claim(claimReq('t', 'g'));
    assert.deepEqual(ids(first), ['k1']);
    await holdOn('messages', 'id', 'k2');
    const appended = store!.append([msg('t', { id: 'k2', key: 'k' })]);
    await until('the append to hold before its commit', async () => (await blockedBy(holderPid)).length > 0);
    assert.deepEqual(await store!.ack(first), [first[0]!.deliveryId]);
    assert.deepEqual(await store!.claim(claimReq('t', 'g')), [], 'nothing committed to claim yet');
    await release();
    await appended;
    assert.deepEqual(await blocked(), []);
    assert.deepEqual(ids(await store!.claim(claimReq('t', 'g'))), ['k2']);
  });

  it('ack first: the append passes over the row being deleted without waiting, and its row is claimable', async () => {
    await store!.append([msg('t', { id: 'k1', key: 'k' })]);
    const first = await store!.claim(claimReq('t', 'g'));
    assert.deepEqual(ids(first), ['k1']);
    await holdOn('acks', 'message_seq', (await adminPool.query(`SELECT seq::text FROM ${s}.messages WHERE id = 'k1'`)).rows[0].seq);
    let acked = false;
    const ack = store!.ack(first).then((r) => ((acked = true), r));
    await until('the ack to hold before its commit', async () => (await blockedBy(holderPid)).length > 0);
    await store!.append([msg('t', { id: 'k2', key: 'k' }), msg('t', { id: 'k3', key: 'k' })]);
    assert.equal(acked, false, 'the append finished while the ack was held');
    assert.deepEqual(await blocked(), ['k3'], 'k3 is behind k2 in its batch; k2 is not flagged');
    await release();
    assert.deepEqual(await ack, [first[0]!.deliveryId]);
    const next = await store!.claim(claimReq('t', 'g'));
    assert.deepEqual(ids(next), ['k2'], 'k2 alone: k3 waits behind it');
    await store!.ack(next);
    assert.deepEqual(await blocked(), []);
    assert.deepEqual(ids(await store!.claim(claimReq('t', 'g'))), ['k3']);
  });

  it('an append flags the rows behind an earlier one of their lane in its batch; each head that leaves unflags the next', async () => {
    await store!.append(['a1', 'a2', 'b1', 'a3'].map((id) => msg('t', { id, key: id[0] })));
    assert.deepEqual(await blocked(), ['a2', 'a3']);
    // a4's lane has live rows, none in its batch: unflagged, and still held to its turn.
    await store!.append([msg('t', { id: 'a4', key: 'a' }), msg('t', { id: 'b2', key: 'b' })]);
    assert.deepEqual(await blocked(), ['a2', 'a3']);
    const heads = await store!.claim(claimReq('t', 'g'));
    assert.deepEqual(ids(heads), ['a1', 'b1']);
    const step = await store!.ackAndClaim(heads, claimReq('t', 'g'));
    assert.deepEqual(ids(step.claimed), ['a2', 'b2'], 'the rows the acks freed, claimed in the same statement');
    assert.deepEqual(await blocked(), ['a3']);
    await store!.ack(step.claimed);
    assert.deepEqual(await blocked(), []);
    const a3 = await store!.claim(claimReq('t', 'g'));
    assert.deepEqual(ids(a3), ['a3'], 'a4 waits behind a3');
    // A dead letter moves the lane on as an ack does.
    assert.equal(await store!.kill(a3[0]!, 'poison'), true);
    assert.deepEqual(ids(await store!.claim(claimReq('t', 'g'))), ['a4']);
  });
});
