/**
 * The store's own connections run with POSTGRES_SESSION_OPTIONS (generic
 * plans, no JIT), also when the connection string or PGOPTIONS gives
 * `options` of its own, which stay in force and win where they name the same
 * setting; a borrowed pool keeps its settings.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { POSTGRES_SESSION_OPTIONS, poolConfig } from '../../src/queue/stores/postgres/connection.js';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { POSTGRES_DIRECT_URL, POSTGRES_SKIP, dropSchema, testSchema } from '../stores/postgres-env.js';

/** plan_cache_mode, jit and application_name of a connection of a pool built from `cfg`. */
async function settings(cfg: pg.PoolConfig): Promise<{ plan: string; jit: string; app: string }> {
  const pool = new pg.Pool({ ...cfg, max: 1 });
  try {
    const r = await pool.query<{ plan: string; jit: string; app: string }>(
      `SELECT current_setting('plan_cache_mode') AS plan, current_setting('jit') AS jit, current_setting('application_name') AS app`,
    );
    return r.rows[0]!;
  } finally {
    await pool.end();
  }
}

describe('postgres session options', () => {
  it('are put before the options the URL or PGOPTIONS gives, whatever the URL form', () => {
    const env = process.env.PGOPTIONS;
    delete process.env.PGOPTIONS;
    try {
      const ours = POSTGRES_SESSION_OPTIONS;
      const urlOptions = (cs: string) => new URLSearchParams(cs.slice(cs.indexOf('?') + 1)).getAll('options');
      assert.equal(poolConfig(pg, 'postgres://u@h/db', 1, undefined, ours).options, ours);
      assert.equal(poolConfig(pg, 'postgres://u@h/db', 1).options, undefined);
      for (const url of [
        'postgres://u@h/db?options=-c%20search_path%3Dapp',
        'postgres://u@/db?host=/var/run/postgresql&options=-c%20search_path%3Dapp',
        'socket:/var/run/postgresql?db=test&options=-c+search_path%3Dapp',
        // pg takes the last of two.
        'postgres://u@h/db?options=-c%20work_mem%3D5MB&options=-c%20search_path%3Dapp&sslmode=disable',
        // pg ignores a fragment.
        'postgres://u@h/db?options=-c%20search_path%3Dapp#frag',
      ]) {
        const cfg = poolConfig(pg, url, 1, undefined, ours);
        assert.equal(cfg.options, undefined, url);
        assert.deepEqual(urlOptions(cfg.connectionString!.split('#')[0]!), [`${ours} -c search_path=app`], url);
        assert.equal(cfg.connectionString!.slice(0, url.indexOf('?')), url.slice(0, url.indexOf('?')), url);
      }
      assert.match(poolConfig(pg, 'postgres://u@h/db?options=-c%20x%3D1&sslmode=disable', 1, undefined, ours).connectionString!, /sslmode=disable/);
      // Options inside the fragment are not pg's: ours go where pg reads them.
      assert.equal(poolConfig(pg, 'postgres://u@h/db#x?options=-c%20jit%3Don', 1, undefined, ours).options, ours);
      process.env.PGOPTIONS = '-c work_mem=11MB';
      assert.equal(poolConfig(pg, 'postgres://u@h/db', 1, undefined, ours).options, `${ours} -c work_mem=11MB`);
    } finally {
      if (env === undefined) delete process.env.PGOPTIONS;
      else process.env.PGOPTIONS = env;
    }
  });

  describe('on a server', { skip: POSTGRES_SKIP }, () => {
    const schema = testSchema('opts');
    after(() => dropSchema(schema));

    it('a connection the store would open plans generically without JIT, and keeps the options of its URL, which win', async () => {
      assert.deepEqual(await settings(poolConfig(pg, POSTGRES_DIRECT_URL, 1, undefined, POSTGRES_SESSION_OPTIONS)), { plan: 'force_generic_plan', jit: 'off', app: '' });
      const url = new URL(POSTGRES_DIRECT_URL);
      url.searchParams.set('options', '-c application_name=ferry_check');
      assert.deepEqual(await settings(poolConfig(pg, url.toString(), 1, undefined, POSTGRES_SESSION_OPTIONS)), { plan: 'force_generic_plan', jit: 'off', app: 'ferry_check' });
      // A setting the user names wins.
      url.searchParams.set('options', '-c plan_cache_mode=auto');
      assert.deepEqual(await settings(poolConfig(pg, url.toString(), 1, undefined, POSTGRES_SESSION_OPTIONS)), { plan: 'auto', jit: 'off', app: '' });
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
