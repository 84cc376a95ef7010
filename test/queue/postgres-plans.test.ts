/**
 * The Postgres store's per-delivery statements stay index-only as finished
 * rows pile up: with FERRY_PLAN_ROWS pending and as many finished rows
 * (default 100,000 each; the figure is 1,000,000, which takes about a
 * minute to load here), no plan reads a table by sequential scan, bitmap scan
 * or hash/merge join, and none is costly enough to be JIT-compiled.
 * `stats` is left out on purpose: counting pending rows is linear in them;
 * so is `remove-group`, which walks every retained message of its topic.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { fillSchema, planProblems } from '../../bench/postgres-fill.js';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { statements } from '../../src/queue/stores/postgres/sql.js';
import { POSTGRES_SKIP, POSTGRES_URL, adminPool, dropSchema, testSchema } from '../stores/postgres-env.js';

const ROWS = Number(process.env.FERRY_PLAN_ROWS ?? 100_000);

describe('postgres store plans', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('plan');
  let store: PostgresStore | undefined;
  after(async () => {
    await store?.close();
    await dropSchema(schema);
  });

  it(`claim, ack, extend, release, retry, kill, purge and listMessages use indexes only at ${ROWS} pending and ${ROWS} finished rows`, async () => {
    store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 2 });
    await fillSchema(adminPool, schema, 't', 'g', ROWS, ROWS);
    const claimed = await store.claim({ topic: 't', group: 'g', runnerId: 'x', max: 16, leaseMs: 60_000, maxInFlight: 0 });
    assert.equal(claimed.length, 16);
    const problems = await planProblems(adminPool, statements(`"${schema}"`), 't', 'g', claimed);
    assert.deepEqual(problems, []);
  });
});
