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
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { claimReq, ids, msg } from '../stores/helpers.js';
import { POSTGRES_SKIP, POSTGRES_URL, adminPool, dropSchema, testSchema } from '../stores/postgres-env.js';
import { StatementHold, waiterOf } from '../stores/postgres-hold.js';

describe('postgres store: lane flags when an append and an ack of the lane meet', { skip: POSTGRES_SKIP }, () => {
  let schema = '';
  let s = '';
  let store: PostgresStore | undefined;
  let hold: StatementHold | undefined;
  const blocked = async () =>
    (await adminPool.query<{ id: string }>(`SELECT m.id FROM ${s}.deliveries d JOIN ${s}.messages m ON m.seq = d.message_seq WHERE d.blocked ORDER BY m.id`)).rows.map((r) => r.id);

  beforeEach(async () => {
    schema = testSchema('lanes');
    s = `"${schema}"`;
    store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 4 });
    await store.ensureGroup('t', 'g', 'latest');
  });
  afterEach(async () => {
    await hold?.end();
    hold = undefined;
    await store?.close();
    store = undefined;
    await dropSchema(schema);
  });

  it('append held before its commit: the ack of the lane\'s last row does not wait for it, and the new row leads next', async () => {
    await store!.append([msg('t', { id: 'k1', key: 'k' })]);
    const first = await store!.claim(claimReq('t', 'g'));
    assert.deepEqual(ids(first), ['k1']);
    hold = new StatementHold(s);
    await hold.on('messages', 'AFTER INSERT', `NEW.id = 'k2'`);
    const appended = store!.append([msg('t', { id: 'k2', key: 'k' })]);
    await waiterOf(hold.pid, 'the append to hold before its commit');
    assert.deepEqual(await store!.ack(first), [first[0]!.deliveryId]);
    assert.deepEqual(await store!.claim(claimReq('t', 'g')), [], 'nothing committed to claim yet');
    await hold.release();
    await appended;
    assert.deepEqual(await blocked(), []);
    assert.deepEqual(ids(await store!.claim(claimReq('t', 'g'))), ['k2']);
  });

  it('ack first: the append passes over the row being deleted without waiting, and its row is claimable', async () => {
    await store!.append([msg('t', { id: 'k1', key: 'k' })]);
    const first = await store!.claim(claimReq('t', 'g'));
    assert.deepEqual(ids(first), ['k1']);
    const seq = (await adminPool.query<{ seq: string }>(`SELECT seq::text FROM ${s}.messages WHERE id = 'k1'`)).rows[0]!.seq;
    hold = new StatementHold(s);
    await hold.on('acked_spans', 'AFTER INSERT', `NEW.first_seq = ${seq}`);
    let acked = false;
    const ack = store!.ack(first).then((r) => ((acked = true), r));
    await waiterOf(hold.pid, 'the ack to hold before its commit');
    await store!.append([msg('t', { id: 'k2', key: 'k' }), msg('t', { id: 'k3', key: 'k' })]);
    assert.equal(acked, false, 'the append finished while the ack was held');
    assert.deepEqual(await blocked(), ['k3'], 'k3 is behind k2 in its batch; k2 is not flagged');
    await hold.release();
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
