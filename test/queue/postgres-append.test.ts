/**
 * The Postgres store's one-statement append (append.sql): a store that knows
 * a topic's groups publishes in one statement, and what it knows is checked
 * against the topic's groups_version under the topic's row lock, so a group
 * registered or removed by another instance, even while the append waits
 * for that lock, is honoured exactly as by the transaction that reads the
 * groups under the lock.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { claimReq, ids, msg } from '../stores/helpers.js';
import { POSTGRES_DIRECT_URL, POSTGRES_SKIP, POSTGRES_URL, adminPool, dropSchema, testSchema } from '../stores/postgres-env.js';

describe('postgres store: one-statement append', { skip: POSTGRES_SKIP }, () => {
  const schemas: string[] = [];
  const closers: Array<() => Promise<void>> = [];
  after(async () => {
    for (const c of closers.reverse()) await c().catch(() => undefined);
    for (const s of schemas) await dropSchema(s);
  });
  const open = async (schema: string, pool?: pg.Pool) => {
    const s = await PostgresStore.open(pool ? { pool, schema } : { connectionString: POSTGRES_URL, schema, poolSize: 2 });
    closers.push(() => s.close());
    return s;
  };
  const fresh = () => {
    const s = testSchema('app');
    schemas.push(s);
    return s;
  };

  /**
   * Waits until `n` sessions wait, directly or behind another waiter, for a
   * lock the session `holder` holds. (A statement's text in pg_stat_activity
   * is cut at 1 KiB, before append.sql names its schema, so it cannot tell.)
   */
  const waitForWaiters = async (holder: pg.PoolClient, n: number) => {
    const pid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    for (let i = 0; i < 500; i++) {
      const r = await adminPool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity a
         WHERE $1 = ANY(pg_blocking_pids(a.pid)) OR EXISTS (SELECT 1 FROM unnest(pg_blocking_pids(a.pid)) b WHERE $1 = ANY(pg_blocking_pids(b)))`,
        [pid],
      );
      if (r.rows[0]!.n >= n) return;
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.fail(`fewer than ${n} sessions came to wait for the lock`);
  };

  it('a publish to a topic whose groups the store knows is one statement; the first one reads them under the topic lock', async () => {
    const schema = fresh();
    const statements: string[] = [];
    const pool = new pg.Pool({ connectionString: POSTGRES_DIRECT_URL, max: 1 });
    closers.push(() => pool.end());
    pool.on('connect', (c) => {
      const query = c.query.bind(c) as (q: unknown, ...rest: unknown[]) => unknown;
      (c as unknown as { query: typeof query }).query = (q, ...rest) => {
        const text = typeof q === 'string' ? q : ((q as { name?: string }).name ?? (q as { text: string }).text);
        statements.push(text.replace(/_[0-9a-f]{12}$/, ''));
        return query(q, ...rest);
      };
    });
    const s = await open(schema, pool);
    await s.ensureGroup('t', 'g', 'latest');
    const during = async (fn: () => Promise<void>) => {
      const from = statements.length;
      await fn();
      return statements.slice(from);
    };
    assert.deepEqual(await during(() => s.append([msg('t', { id: 'a' })])), ['BEGIN', 'ferry_lock-topics', 'ferry_groups-of', 'ferry_append', 'COMMIT']);
    assert.deepEqual(await during(() => s.append([msg('t', { id: 'b' }), msg('t', { id: 'c' })])), ['ferry_append']);
    assert.deepEqual(await during(() => s.append([msg('t', { id: 'd' })])), ['ferry_append']);
    assert.deepEqual(ids(await s.claim(claimReq('t', 'g'))), ['a', 'b', 'c', 'd']);
  });

  it('two appends of the same new IDs at once, from two stores: both resolve, and each ID is stored and delivered once', async () => {
    const schema = fresh();
    const a = await open(schema);
    const b = await open(schema);
    await a.ensureGroup('t', 'g', 'latest');
    // Both stores learn t's groups, so each append is the one statement.
    await a.append([msg('t', { id: 'a0' })]);
    await b.append([msg('t', { id: 'b0' })]);
    const other = await adminPool.connect();
    let appends: Promise<unknown> | undefined;
    try {
      // Hold t's row lock: both appends take their snapshots, then wait for it.
      await other.query('BEGIN');
      await other.query(`SELECT 1 FROM "${schema}".topics WHERE topic = 't' FOR UPDATE`);
      const batch = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => msg('t', { id: `m${from + i}` }));
      appends = Promise.allSettled([a.append(batch(1, 6)), b.append(batch(3, 8))]);
      await waitForWaiters(other, 2);
      await other.query('COMMIT');
    } finally {
      other.release();
    }
    // The later of the two inserts meets the other's rows on the ID index and stores none of them again.
    const settled = (await appends) as PromiseSettledResult<void>[];
    assert.deepEqual(settled.map((r) => r.status), ['fulfilled', 'fulfilled'], String(settled.map((r) => (r as PromiseRejectedResult).reason)));
    const stored = await adminPool.query<{ id: string }>(`SELECT id FROM "${schema}".messages ORDER BY seq`);
    const want = ['a0', 'b0', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7'];
    assert.deepEqual([...stored.rows.map((r) => r.id)].sort(), want);
    const got = ids(await a.claim(claimReq('t', 'g', { max: 20 })));
    assert.deepEqual([...got].sort(), want, 'each ID delivered once');
  });

  it('one call naming an ID twice stores its first copy, once', async () => {
    const schema = fresh();
    const a = await open(schema);
    await a.ensureGroup('t', 'g', 'latest');
    await a.append([msg('t', { id: 'x', payload: Buffer.from('first') }), msg('t', { id: 'y' }), msg('t', { id: 'x', payload: Buffer.from('second') })]);
    const got = await a.claim(claimReq('t', 'g', { max: 10 }));
    assert.deepEqual(ids(got), ['x', 'y']);
    assert.equal(Buffer.from(got[0]!.message.payload).toString(), 'first');
  });

  it('a group registered while an append waits for the topic lock gets the message (the row lock sees the new groups_version)', async () => {
    const schema = fresh();
    const a = await open(schema);
    await a.ensureGroup('t', 'g', 'latest');
    await a.append([msg('t', { id: 'first' })]); // a now knows t's groups: {g}
    const other = await adminPool.connect();
    let waiting: Promise<void> | undefined;
    try {
      await other.query('BEGIN');
      // As ensureGroup does: lock the topic, then register the group.
      await other.query(`INSERT INTO "${schema}".topics (topic) VALUES ('t') ON CONFLICT (topic) DO UPDATE SET topic = excluded.topic WHERE false`);
      await other.query(`INSERT INTO "${schema}".groups (topic, grp) VALUES ('t', 'h')`);
      waiting = a.append([msg('t', { id: 'raced' })]);
      // The append is blocked on the topic's row lock.
      await waitForWaiters(other, 1);
      await other.query('COMMIT');
    } finally {
      other.release();
    }
    await waiting;
    assert.deepEqual(ids(await a.claim(claimReq('t', 'g'))), ['first', 'raced']);
    assert.deepEqual(ids(await a.claim(claimReq('t', 'h'))), ['raced']);
  });

  it("another instance's new group gets the next publish, its removed group none, and a repeated ID is stored once", async () => {
    const schema = fresh();
    const a = await open(schema);
    const b = await open(schema);
    await a.ensureGroup('t', 'g', 'latest');
    await a.ensureGroup('t', 'gone', 'latest');
    await a.append([msg('t', { id: 'one' })]);
    await b.ensureGroup('t', 'h', 'earliest');
    assert.equal(await b.removeGroup('t', 'gone'), true);
    await a.append([msg('t', { id: 'two' }), msg('t', { id: 'two' })]);
    await a.append([msg('t', { id: 'two' }), msg('t', { id: 'three' })]);
    assert.deepEqual(ids(await a.claim(claimReq('t', 'g'))), ['one', 'two', 'three']);
    assert.deepEqual(ids(await a.claim(claimReq('t', 'h'))), ['one', 'two', 'three']);
    assert.equal((await adminPool.query(`SELECT count(*)::int AS n FROM "${schema}".deliveries WHERE grp = 'gone'`)).rows[0].n, 0);
    assert.equal((await adminPool.query(`SELECT count(*)::int AS n FROM "${schema}".messages`)).rows[0].n, 3);
  });

  it('a batch over several topics, some without groups, fans out to each topic\'s own groups', async () => {
    const schema = fresh();
    const a = await open(schema);
    await a.ensureGroup('x', 'g', 'latest');
    await a.ensureGroup('y', 'g', 'latest');
    for (let round = 0; round < 2; round++) {
      await a.append([msg('x', { id: `x${round}` }), msg('none', { id: `n${round}` }), msg('y', { id: `y${round}` })]);
    }
    assert.deepEqual(ids(await a.claim(claimReq('x', 'g'))), ['x0', 'x1']);
    assert.deepEqual(ids(await a.claim(claimReq('y', 'g'))), ['y0', 'y1']);
    assert.equal((await adminPool.query(`SELECT count(*)::int AS n FROM "${schema}".messages WHERE topic = 'none'`)).rows[0].n, 2);
  });
});
