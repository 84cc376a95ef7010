/**
 * The store's own connections run with POSTGRES_SESSION_OPTIONS (generic
 * plans, no JIT), also when the connection string gives `options` of its
 * own, which stay in force; a borrowed pool keeps its settings.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { POSTGRES_SESSION_OPTIONS, poolConfig } from '../../src/queue/stores/postgres/connection.js';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { POSTGRES_DIRECT_URL, POSTGRES_SKIP, dropSchema, testSchema } from '../stores/postgres-env.js';

/** plan_cache_mode, jit and statement_timeout of a connection of a pool built from `cfg`. */
async function settings(cfg: pg.PoolConfig): Promise<{ plan: string; jit: string; timeout: string }> {
  const pool = new pg.Pool({ ...cfg, max: 1 });
  try {
    const r = await pool.query<{ plan: string; jit: string; timeout: string }>(
      `SELECT current_setting('plan_cache_mode') AS plan, current_setting('jit') AS jit, current_setting('statement_timeout') AS timeout`,
    );
    return r.rows[0]!;
  } finally {
    await pool.end();
  }
}

describe('postgres session options', () => {
  it('are added to the pool settings, after any options the URL gives', () => {
    assert.equal(poolConfig(pg, 'postgres://u@h/db', 1, undefined, POSTGRES_SESSION_OPTIONS).options, POSTGRES_SESSION_OPTIONS);
    assert.equal(poolConfig(pg, 'postgres://u@h/db', 1).options, undefined);
    const cfg = poolConfig(pg, 'postgres://u@h/db?options=-c%20search_path%3Dapp', 1, undefined, POSTGRES_SESSION_OPTIONS);
    assert.equal(cfg.options, undefined);
    assert.equal(new URL(cfg.connectionString!).searchParams.get('options'), `-c search_path=app ${POSTGRES_SESSION_OPTIONS}`);
  });

  describe('on a server', { skip: POSTGRES_SKIP }, () => {
    const schema = testSchema('opts');
    after(() => dropSchema(schema));

    it('a connection the store would open plans generically without JIT, and keeps the options of its URL', async () => {
      assert.deepEqual(await settings(poolConfig(pg, POSTGRES_DIRECT_URL, 1, undefined, POSTGRES_SESSION_OPTIONS)), { plan: 'force_generic_plan', jit: 'off', timeout: '0' });
      const url = new URL(POSTGRES_DIRECT_URL);
      url.searchParams.set('options', '-c statement_timeout=4321');
      assert.deepEqual(await settings(poolConfig(pg, url.toString(), 1, undefined, POSTGRES_SESSION_OPTIONS)), { plan: 'force_generic_plan', jit: 'off', timeout: '4321ms' });
    });

    it('the store works through a borrowed pool without them, and leaves its settings alone', async () => {
      const pool = new pg.Pool({ connectionString: POSTGRES_DIRECT_URL, max: 2 });
      const store = await PostgresStore.open({ pool, schema });
      try {
        await store.ensureGroup('t', 'g', 'latest');
        await store.append([{ id: 'm1', topic: 't', payload: new Uint8Array([1]), publishedAt: new Date() }]);
        const [c] = await store.claim({ topic: 't', group: 'g', runnerId: 'r', max: 5, leaseMs: 30_000, maxInFlight: 0 });
        assert.equal(c?.message.id, 'm1');
        assert.deepEqual(await store.ack([c!]), [c!.deliveryId]);
        const r = await pool.query<{ plan: string }>(`SELECT current_setting('plan_cache_mode') AS plan`);
        assert.equal(r.rows[0]!.plan, 'auto');
      } finally {
        await store.close();
        await pool.end();
      }
    });
  });
});
