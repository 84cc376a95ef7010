/**
 * `removeGroup` beside an ack of the same group's leased rows on Postgres.
 * On a large table removeGroup deletes the group's rows in message order,
 * and an ack locks the rows it names through the primary key, which leads
 * with the message (migration 12): the same order, so removeGroup queues
 * behind an ack rather than crossing it. The first test holds an ack on
 * the first row in message order and checks that it has not touched the
 * second, that removeGroup waits for it, and that both then finish. The
 * second runs removals, an ack, an ackAndClaim and an extend at once:
 * whatever order some of them take rows in, removeGroup must give way
 * before Postgres's deadlock detector aborts anything (SQLSTATE 40P01).
 * Every query of the store's pool is watched for a deadlock, including the
 * ones removeGroup would try again by itself.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { deliveryId } from '../../src/queue/delivery-id.js';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { claimReq, msg } from '../stores/helpers.js';
import { POSTGRES_DIRECT_URL, POSTGRES_SKIP, adminPool, dropSchema, testSchema } from '../stores/postgres-env.js';
import { StatementHold, waiterOf } from '../stores/postgres-hold.js';

describe('postgres store: removeGroup and an ack of the group at once', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('rmgroup');
  const s = `"${schema}"`;
  const deadlocks: string[] = [];
  let pool: pg.Pool | undefined;
  let store: PostgresStore | undefined;
  let hold: StatementHold | undefined;

  before(async () => {
    pool = new pg.Pool({ connectionString: POSTGRES_DIRECT_URL, max: 4 });
    pool.on('error', () => undefined);
    // Every statement the store runs goes through a pooled client's query.
    // Each connection is told to plan as on a large table (index scans, no
    // hash joins), so removeGroup walks the topic's messages in order and
    // an ack finds its rows through an index; on a few thousand rows the
    // planner would read both in table order and their orders would agree.
    pool.on('connect', (client) => {
      void client.query('SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_hashjoin = off; SET enable_mergejoin = off');
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        const r = query(...args);
        if (r instanceof Promise) r.catch((err: { code?: string; message?: string }) => void (err.code === '40P01' && deadlocks.push(String(err.message))));
        return r;
      };
    });
    store = await PostgresStore.open({ pool, schema });
  });
  after(async () => {
    await hold?.end();
    await store?.close();
    await pool?.end();
    await dropSchema(schema);
  });

  /** Whether `id`'s row is free to lock now (an admin transaction tries it and rolls back). */
  async function free(id: string): Promise<boolean> {
    const c = await adminPool.connect();
    try {
      await c.query('BEGIN');
      return (await c.query(`SELECT 1 FROM ${s}.deliveries WHERE delivery_id = $1 FOR UPDATE SKIP LOCKED`, [id])).rowCount === 1;
    } finally {
      await c.query('ROLLBACK');
      c.release();
    }
  }

  it('an ack and removeGroup take rows in message order: removeGroup waits for the ack, which completes both rows; nobody is aborted by a deadlock', async () => {
    // The second's delivery ID sorts first, and its lease ends first: the
    // order the primary key on delivery IDs (before migration 12) and the
    // leased index would lock in. The ack still takes the first first.
    let n = 0;
    while (deliveryId(`second-${n}`, 'g') > deliveryId(`first-${n}`, 'g')) n++;
    await store!.ensureGroup('t', 'g', 'latest');
    await store!.append([msg('t', { id: `first-${n}` }), msg('t', { id: `second-${n}` })]);
    const [a] = await store!.claim(claimReq('t', 'g', { max: 1, leaseMs: 120_000 }));
    const [b] = await store!.claim(claimReq('t', 'g', { max: 1, leaseMs: 60_000 }));
    assert.deepEqual([a?.message.id, b?.message.id], [`first-${n}`, `second-${n}`]);

    hold = new StatementHold(s);
    await hold.on('deliveries', 'BEFORE DELETE', `OLD.delivery_id = '${a!.deliveryId}'`);
    const acking = store!.ack([b!, a!]);
    const ackPid = await waiterOf(hold.pid, 'the ack to hold on the row it locks first');
    assert.equal(await free(a!.deliveryId), false, 'the ack holds the first in message order');
    assert.equal(await free(b!.deliveryId), true, 'and has not touched the second');
    const removing = store!.removeGroup('t', 'g');
    await waiterOf(ackPid, 'removeGroup to wait for the ack, on the first');
    await hold.release();

    assert.deepEqual([...(await acking)].sort(), [a!.deliveryId, b!.deliveryId].sort());
    assert.equal(await removing, true);
    assert.deepEqual(deadlocks, []);
    assert.deepEqual(await store!.listGroups('t'), []);
    assert.equal((await adminPool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${s}.deliveries`)).rows[0]!.n, 0);
  });

  it('at once: two removeGroups, an ack, an ackAndClaim and an extend of the same group; one removal wins, nothing is aborted, nothing is left', async () => {
    await hold?.end();
    hold = undefined;
    deadlocks.length = 0;
    for (let round = 0; round < 5; round++) {
      const g = `at-once-${round}`;
      await store!.ensureGroup('u', g, 'latest');
      // 40 lanes of 5, published key by key: acks free the next row of each lane (the lane triggers).
      await store!.append(Array.from({ length: 200 }, (_, i) => msg('u', { id: `${g}-${i}`, key: `k${Math.floor(i / 5)}` })));
      const leased = await store!.claim(claimReq('u', g, { max: 200 }));
      assert.equal(leased.length, 40, 'one head per lane');
      const [acked, stepped, extended, first, second] = await Promise.all([
        store!.ack(leased.slice(0, 15)),
        store!.ackAndClaim(leased.slice(15, 30), claimReq('u', g, { max: 50 })),
        store!.extend(leased.slice(30), 60_000),
        store!.removeGroup('u', g),
        store!.removeGroup('u', g),
      ]);
      assert.deepEqual([first, second].sort(), [false, true], 'exactly one removal found the group');
      // Each call reports only rows it was given (the ones the removal had not deleted first).
      const within = (got: string[], from: typeof leased) => got.every((id) => from.some((c) => c.deliveryId === id));
      assert.ok(within(acked, leased.slice(0, 15)));
      assert.ok(within(stepped.acked, leased.slice(15, 30)));
      assert.ok(within(extended, leased.slice(30)));
      assert.deepEqual(await store!.listGroups('u'), []);
      const left = await adminPool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${s}.deliveries WHERE topic = 'u'`);
      assert.equal(left.rows[0]!.n, 0);
    }
    assert.deepEqual(deadlocks, []);
  });
});
