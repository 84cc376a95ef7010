/**
 * The Postgres store's per-delivery statements stay index-only as finished
 * rows pile up: with FERRY_PLAN_ROWS pending and as many finished rows
 * (default 100,000 each; 1,000,000, the size this was first measured at, takes
 * about a minute to load here), no plan reads a table by sequential scan, bitmap scan
 * or hash/merge join, and none is costly enough to be JIT-compiled.
 * `stats` is left out on purpose: counting pending rows is linear in them;
 * so is `remove-group`, which walks every retained message of its topic.
 * The schedule statements a scheduler runs per tick are checked among
 * 10,000 schedules.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { explainProblems, fillSchema, planProblems } from '../../bench/postgres-fill.js';
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

  it('the schedule statements a scheduler runs per tick find their row through the primary key, among 10,000 schedules', async () => {
    // list-schedules is left out: every round reads the whole (small) table by design.
    store ??= await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 2 });
    const s = `"${schema}"`;
    await adminPool.query(
      `INSERT INTO ${s}.schedules (name, revision, spec, payload, updated_at)
       SELECT 'plan-' || g, 'r', '{"everyMs":1000,"topic":"t","catchUp":"latest"}', '\\x00', now() FROM generate_series(1, 10000) g`,
    );
    await adminPool.query(`ANALYZE ${s}.schedules`);
    const at = new Date();
    const problems = await explainProblems(adminPool, statements(s), [
      ['advance-schedule', ['plan-5000', 'r', at]],
      ['put-schedule', ['plan-5000', 'r2', '{}', Buffer.from([0]), at]],
      ['delete-schedule', ['plan-5000']],
    ]);
    assert.deepEqual(problems, []);
  });

  it(`a claim reads live rows only, not the deliveries acked since the last ANALYZE ahead of them in publish order`, async () => {
    // The statistics still say every row is pending, as after a bulk load
    // that consumers then work through: nothing tells the planner that the
    // head of publish order is finished. A claim that walked publish order
    // through every delivery would read thousands of pages here.
    const s2 = testSchema('plan2');
    const own = await PostgresStore.open({ connectionString: POSTGRES_URL, schema: s2, poolSize: 1 });
    const c = await adminPool.connect();
    try {
      await fillSchema(adminPool, s2, 't', 'g', ROWS, 0);
      await c.query(`DELETE FROM "${s2}".deliveries WHERE message_seq <= (SELECT min(seq) + $1 FROM "${s2}".messages)`, [ROWS / 2]);
      await c.query('BEGIN');
      const res = await c.query<{ 'QUERY PLAN': Array<{ Plan: { 'Shared Hit Blocks': number; 'Shared Read Blocks': number } }> }>(
        `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${statements(`"${s2}"`).claim}`,
        ['t', 'g', 128, 'plan-check', 30_000],
      );
      await c.query('ROLLBACK');
      const plan = res.rows[0]!['QUERY PLAN'][0]!.Plan;
      const pages = plan['Shared Hit Blocks'] + plan['Shared Read Blocks'];
      // Through deliveries_pending it steps over the acked rows' dead index entries once
      // (about ROWS / 30 pages); walking publish order it reads about ROWS pages.
      assert.ok(pages < ROWS / 5, `the claim read ${pages} pages`);
    } finally {
      c.release();
      await own.close();
      await dropSchema(s2);
    }
  });
  it(`the poll query probes each pair through an index, in the generic plan a prepared statement gets from its sixth run`, async () => {
    // A single EXISTS let the generic plan join every pair with every due row
    // of the schema (2,000 idle pairs beside 5,000 rows of another group:
    // 20 ms, then 1.5 s per poll from the sixth). Here: 1,000 idle pairs
    // beside the ROWS pending rows of t/g, planned without their values.
    store ??= await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 2 });
    const c = await adminPool.connect();
    try {
      const topics = `{${Array.from({ length: 1000 }, (_, i) => `idle${i}`).join(',')}}`;
      const groups = `{${Array.from({ length: 1000 }, () => 'g').join(',')}}`;
      await c.query(`PREPARE due_pairs_plan(text[], text[]) AS ${statements(`"${schema}"`)['due-pairs']}`);
      await c.query('SET plan_cache_mode = force_generic_plan');
      type Node = { 'Node Type': string; 'Relation Name'?: string; 'Index Name'?: string; Filter?: string; Plans?: Node[] };
      const res = await c.query<{ 'QUERY PLAN': Array<{ Plan: Node }> }>(`EXPLAIN (FORMAT JSON) EXECUTE due_pairs_plan('${topics}', '${groups}')`);
      const nodes: Node[] = [];
      const walk = (n: Node) => (nodes.push(n), (n.Plans ?? []).forEach(walk));
      walk(res.rows[0]!['QUERY PLAN'][0]!.Plan);
      const whole = nodes.filter((n) => ['Seq Scan', 'Bitmap Heap Scan', 'Hash Join', 'Merge Join'].includes(n['Node Type']) || /hashed SubPlan/.test(n.Filter ?? ''));
      assert.deepEqual(whole.map((n) => `${n['Node Type']} ${n['Relation Name'] ?? ''}`), [], 'no node reads every due row of the schema');
      const probes = nodes.filter((n) => n['Node Type'] === 'Index Scan').map((n) => n['Index Name']);
      assert.ok(probes.includes('deliveries_pending') && probes.includes('deliveries_leased'), `probes: ${probes.join(', ')}`);
    } finally {
      await c.query('DEALLOCATE ALL; RESET plan_cache_mode').catch(() => undefined);
      c.release();
    }
  });
});
