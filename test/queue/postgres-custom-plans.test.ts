/**
 * The Postgres store's calls that run planned for their values (listing a
 * topic's messages and groups, creating and removing groups: a transaction
 * begun with `SET LOCAL plan_cache_mode = force_custom_plan`) are correct
 * when callers run them at once, beside publishes and claims, on a pool
 * smaller than the number of callers; and the setting ends with each
 * transaction: every connection of the pool is back on generic plans.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { POSTGRES_SESSION_OPTIONS } from '../../src/queue/stores/postgres/connection.js';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { POSTGRES_DIRECT_URL, POSTGRES_SKIP, dropSchema, testSchema } from '../stores/postgres-env.js';

const message = (topic: string, i: number) => ({ id: `${topic}-${i}`, topic, payload: new Uint8Array([i]), publishedAt: new Date() });

describe('postgres calls planned for their values, at once', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('custom');
  const pool = new pg.Pool({ connectionString: POSTGRES_DIRECT_URL, options: POSTGRES_SESSION_OPTIONS, max: 2 });
  after(async () => {
    await pool.end();
    await dropSchema(schema);
  });

  it('listMessages, listGroups, ensureGroup and removeGroup run at once beside publishes and claims, each as it would alone', async () => {
    const store = await PostgresStore.open({ pool, schema });
    try {
      await Promise.all([store.ensureGroup('s', 'g', 'latest'), store.ensureGroup('s', 'gone', 'latest'), store.ensureGroup('t', 'w', 'latest')]);
      await store.append(Array.from({ length: 10 }, (_, i) => message('s', i)));
      const ids = Array.from({ length: 10 }, (_, i) => `s-${i}`);

      const [pages, groups, , , removed, removedAgain, , claimed] = await Promise.all([
        Promise.all([1, 2, 3].map(() => store.listMessages('s', { limit: 4 }))),
        store.listGroups('s'),
        // Two callers create the same `earliest` group: one backfills, once.
        store.ensureGroup('s', 'late', 'earliest'),
        store.ensureGroup('s', 'late', 'earliest'),
        store.removeGroup('s', 'gone'),
        store.removeGroup('s', 'gone'),
        store.append(Array.from({ length: 5 }, (_, i) => message('t', i))),
        store.claim({ topic: 's', group: 'g', runnerId: 'r', max: 10, leaseMs: 30_000, maxInFlight: 0 }),
      ]);

      for (const page of pages) {
        assert.deepEqual(page.messages.map((m) => m.id), ids.slice(0, 4));
        assert.ok(page.next !== undefined);
      }
      // listGroups ran beside a creation and a removal: it saw g, and each of
      // the others as before or as after, in order.
      const names = groups.map((g) => g.group);
      assert.ok(names.includes('g') && names.every((n) => ['g', 'gone', 'late'].includes(n)), names.join(','));
      assert.deepEqual(names, [...names].sort());
      assert.ok(groups.every((g) => g.topic === 's'));
      assert.deepEqual([removed, removedAgain].sort(), [false, true]);
      assert.deepEqual(claimed.map((c) => c.message.id).sort(), [...ids].sort());
      assert.deepEqual(await store.listGroups('s'), [
        { topic: 's', group: 'g' },
        { topic: 's', group: 'late' },
      ]);
      // The late group got every message once, in publish order.
      const late = await store.claim({ topic: 's', group: 'late', runnerId: 'r', max: 100, leaseMs: 30_000, maxInFlight: 0 });
      assert.deepEqual(late.map((c) => c.message.id), ids);
      const next = await store.listMessages('s', { limit: 4, after: pages[0]!.next });
      assert.deepEqual(next.messages.map((m) => m.id), ids.slice(4, 8));

      // Both connections of the pool are back on the store's settings.
      const clients = await Promise.all([pool.connect(), pool.connect()]);
      try {
        for (const c of clients) assert.equal((await c.query<{ mode: string }>(`SELECT current_setting('plan_cache_mode') AS mode`)).rows[0]!.mode, 'force_generic_plan');
      } finally {
        for (const c of clients) c.release();
      }
    } finally {
      await store.close();
    }
  });
});
