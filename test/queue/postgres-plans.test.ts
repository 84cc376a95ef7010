/**
 * The Postgres store's statements stay index-only as finished rows pile up:
 * with FERRY_PLAN_ROWS pending and as many finished rows (default 100,000
 * each; 1,000,000, the size this was first measured at, takes about a minute
 * to load here), no plan of a per-delivery, publish or poll statement grows
 * with a table (test/helpers/postgres-plans.ts lists what counts), neither
 * the plan the planner makes for the statement's values nor the generic
 * plan the store's own connections run (they connect with
 * `plan_cache_mode=force_generic_plan`, and without JIT: at ten million
 * pending rows a claim's estimated cost passes `jit_above_cost`).
 * `stats` is left out on purpose: counting pending rows is linear in them;
 * so is `remove-group`, which walks every retained message of its topic, and
 * `list-groups` and `list-schedules`, which list a whole (small) table.
 * The schedule statements a scheduler runs per tick are checked among
 * 10,000 schedules. With the backlog spread over 10 priorities, a claim
 * reads its rows off the pending index in claim order: no Sort node sorts
 * the backlog, and it reads about as many pages as a claim of a backlog
 * without priorities.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { fillSchema } from '../../bench/postgres-fill.js';
import { deliveryId } from '../../src/queue/delivery-id.js';
import pg from 'pg';
import { POSTGRES_SESSION_OPTIONS } from '../../src/queue/stores/postgres/connection.js';
import { appendValues } from '../../src/queue/stores/postgres/fan-out.js';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { arrayLiteral, statements } from '../../src/queue/stores/postgres/sql.js';
import { splitToken } from '../../src/queue/stores/postgres/rows.js';
import type { Claimed } from '../../src/queue/types.js';
import { customPlanProblems, genericPlanProblems, type PlanCase } from '../helpers/postgres-plans.js';
import { POSTGRES_DIRECT_URL, POSTGRES_SKIP, POSTGRES_URL, adminPool, dropSchema, testSchema } from '../stores/postgres-env.js';

const ROWS = Number(process.env.FERRY_PLAN_ROWS ?? 100_000);

/**
 * The statements a publish, a poll and a delivery's life run, with live
 * values: `claimed` are deliveries of (topic, group) currently leased, whose
 * IDs and tokens feed ack and friends; `idle` are topics with one group `g`
 * and nothing to deliver, polled beside (topic, group).
 */
function planCases(topic: string, group: string, claimed: Claimed[], idle: string[]): PlanCase[] {
  // The fenced writes' parameters: the message seqs and uuids of the claim tokens (rows.ts).
  const ids = claimed.map((c) => splitToken(c.claimToken)![0]);
  const tokens = claimed.map((c) => splitToken(c.claimToken)![1]);
  const now = new Date();
  const msgs = [
    { id: 'plan-1', topic, payload: new Uint8Array([1]), publishedAt: now },
    { id: 'plan-2', topic, key: 'k', payload: new Uint8Array([2]), publishedAt: now, headers: { h: 'v' } },
  ];
  return [
    ['claim', [topic, group, 32, 'plan-check', 30_000, false]],
    ['claim', [topic, group, 32, 'plan-check', 30_000, true]],
    ['ack-and-claim', [topic, group, 32, 'plan-check', 30_000, false, ids, tokens, 'plan-check']],
    ['claim-lock-group', [topic, group]],
    ['claim-budget', [topic, group, 64, 1000]],
    ['set-group-paused', [topic, group, false, 'plan-check']],
    ['ack', [ids, tokens, 'plan-check']],
    ['extend', [ids, tokens, 30_000]],
    ['release', [ids, tokens, 'plan-check']],
    ['retry', [ids[0], tokens[0], 1000, 'plan-check']],
    ['kill', [ids[0], tokens[0], 'plan-check', 'plan-check', 0]],
    ['purge-dead', [3_600_000, 500]],
    ['purge-victims', [3_600_000, 500]],
    ['purge-messages', [['1', '2'], 3_600_000]],
    ['purge-acked-spans', [3_600_000, 500]],
    ['janitor', ['plan-check', 1000]],
    ['list-messages', [topic, '0', 257]],
    ['lock-topics', [[topic]]],
    ['groups-of', [[topic]]],
    ['append', appendValues(msgs, [topic], new Map([[topic, { version: '1', groups: [group] }]]), 'plan-check')],
    ['due-pairs', [arrayLiteral([topic, ...idle]), arrayLiteral([group, ...idle.map(() => 'g')])]],
    ['create-group', [topic, 'plan-new']],
    ['backfill-page', [topic, '0', 5000]],
    ['backfill', [topic, 'plan-new', ['1', '2'], [deliveryId('plan-1', 'plan-new'), deliveryId('plan-2', 'plan-new')]]],
  ];
}

describe('postgres store plans', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('plan');
  let store: PostgresStore | undefined;
  after(async () => {
    await store?.close();
    await dropSchema(schema);
  });

  it(`the statements of a publish, a poll and a delivery's life use indexes only at ${ROWS} pending and ${ROWS} finished rows, planned for their values and generic`, async () => {
    store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 2 });
    await fillSchema(adminPool, schema, 't', 'g', ROWS, ROWS);
    // 3,000 idle topics of 3 groups each: the groups table as a process with
    // many subscriptions has it.
    const s = `"${schema}"`;
    await adminPool.query(`INSERT INTO ${s}.topics (topic) SELECT 'idle' || i FROM generate_series(1, 3000) i`);
    await adminPool.query(`INSERT INTO ${s}.groups (topic, grp) SELECT 'idle' || i, g FROM generate_series(1, 3000) i, (VALUES ('a'), ('b'), ('g')) v(g)`);
    await adminPool.query(`ANALYZE ${s}.topics; ANALYZE ${s}.groups`);
    const claimed = await store.claim({ topic: 't', group: 'g', runnerId: 'x', max: 16, leaseMs: 60_000, maxInFlight: 0 });
    assert.equal(claimed.length, 16);
    // Statistics that know some deliveries are leased, as a running queue's
    // do: another 1% of the backlog is in flight.
    await store.claim({ topic: 't', group: 'g', runnerId: 'y', max: ROWS / 100, leaseMs: 60_000, maxInFlight: 0 });
    await adminPool.query(`ANALYZE ${s}.deliveries`);
    const cases = planCases('t', 'g', claimed, Array.from({ length: 1000 }, (_, i) => `idle${i + 1}`));
    assert.deepEqual(await customPlanProblems(adminPool, statements(s), cases), [], 'custom plans');
    assert.deepEqual(await genericPlanProblems(adminPool, statements(s), cases), [], 'generic plans');
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
    const cases: PlanCase[] = [
      ['advance-schedule', ['plan-5000', 'r', at]],
      ['put-schedule', ['plan-5000', 'r2', '{}', Buffer.from([0]), at]],
      ['delete-schedule', ['plan-5000']],
    ];
    assert.deepEqual(await customPlanProblems(adminPool, statements(s), cases), [], 'custom plans');
    assert.deepEqual(await genericPlanProblems(adminPool, statements(s), cases), [], 'generic plans');
  });

  it(`a small topic's messages beside ${ROWS} of another are read through the topic's index: list-messages, backfill and list-groups run with plans made for their values`, async () => {
    // Their generic plan walks every message in publish order through the
    // primary key, filtering on the topic (thousands of pages here).
    const s2 = testSchema('plan5');
    const log: string[] = [];
    const pool = new pg.Pool({ connectionString: POSTGRES_DIRECT_URL, options: POSTGRES_SESSION_OPTIONS, max: 1 });
    pool.on('connect', (client) => {
      const query = client.query.bind(client) as (...a: unknown[]) => unknown;
      (client as unknown as { query: (...a: unknown[]) => unknown }).query = (q: unknown, ...rest: unknown[]) => {
        const cfg = q as { name?: string; text?: string };
        log.push(typeof q === 'string' ? q : (cfg.name ?? cfg.text ?? '').replace(/^ferry_(.*)_[0-9a-f]{12}$/, '$1'));
        return query(q, ...rest);
      };
    });
    const own = await PostgresStore.open({ pool, schema: s2 });
    const c = await adminPool.connect();
    try {
      await fillSchema(adminPool, s2, 't', 'g', ROWS, 0);
      await own.ensureGroup('s', 'g', 'latest');
      await own.append(Array.from({ length: 10 }, (_, i) => ({ id: `s${i}`, topic: 's', payload: new Uint8Array([i]), publishedAt: new Date() })));
      await adminPool.query(`ANALYZE "${s2}".messages`);
      log.length = 0;
      assert.equal((await own.listMessages('s', { limit: 100 })).messages.length, 10);
      await own.ensureGroup('s', 'g2', 'earliest');
      assert.deepEqual(await own.listGroups('s'), [{ topic: 's', group: 'g' }, { topic: 's', group: 'g2' }]);
      assert.equal((await own.stats('s', 'g2')).pending, 10);
      // Each runs inside a transaction begun with custom plans.
      const custom = 'BEGIN; SET LOCAL plan_cache_mode = force_custom_plan';
      const inCustom = (name: string) => {
        const at = log.indexOf(name);
        const begun = log.lastIndexOf(custom, at);
        return at > 0 && begun >= 0 && !log.slice(begun, at).includes('COMMIT');
      };
      for (const name of ['list-messages', 'backfill-page', 'backfill', 'list-groups']) assert.ok(inCustom(name), `${name} in ${log.join(' | ')}`);
      // Planned for the topic's value, the page reads the topic's index.
      const sql = statements(`"${s2}"`);
      await c.query(`SET plan_cache_mode = force_generic_plan; ${custom}`);
      for (const name of ['list-messages', 'backfill-page'] as const) {
        await c.query(`PREPARE page AS ${sql[name]}`);
        const res = await c.query<{ 'QUERY PLAN': Array<{ Plan: { 'Shared Hit Blocks': number; 'Shared Read Blocks': number } }> }>(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE page('s', 0, 5000)`);
        await c.query('DEALLOCATE page');
        const plan = res.rows[0]!['QUERY PLAN'][0]!.Plan;
        assert.ok(plan['Shared Hit Blocks'] + plan['Shared Read Blocks'] < 50, `${name} read ${plan['Shared Hit Blocks'] + plan['Shared Read Blocks']} pages`);
      }
    } finally {
      await c.query('ROLLBACK; RESET plan_cache_mode').catch(() => undefined);
      c.release();
      await own.close();
      await pool.end();
      await dropSchema(s2);
    }
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
        ['t', 'g', 128, 'plan-check', 30_000, false],
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
  it(`with ${ROWS} pending rows across 10 priorities a claim walks the pending index in claim order: no Sort over the backlog, no more pages than without priorities`, async () => {
    const flat = testSchema('plan3');
    const spread = testSchema('plan4');
    const own: PostgresStore[] = [];
    try {
      for (const [schema, priorities] of [[flat, 1], [spread, 10]] as const) {
        own.push(await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 1 }));
        await fillSchema(adminPool, schema, 't', 'g', ROWS, 0, 4, priorities);
      }
      const flatPlan = await explainClaim(flat, false);
      const spreadPlan = await explainClaim(spread, false);
      const limitedPlan = await explainClaim(spread, true);
      for (const [what, plan] of [['flat', flatPlan], ['10 priorities', spreadPlan], ['10 priorities, rate-limited', limitedPlan]] as const) {
        assert.deepEqual(plan.sortsOverBacklog, [], `${what}: a Sort above a read of the backlog`);
        assert.ok(plan.pendingScans.length > 0 && plan.pendingScans.every((n) => n === 'Index Scan'), `${what}: pending rows read by ${plan.pendingScans.join(', ')}`);
        assert.equal(plan.rows, 32, `${what}: rows claimed`);
      }
      // Every claimed row has the top priority, in publish order.
      assert.deepEqual(spreadPlan.priorities, Array(32).fill(9));
      // Within 1.5× of the flat claim's pages plus a small constant: the
      // walk stops after the first rows of the index in both.
      assert.ok(spreadPlan.pages <= flatPlan.pages * 1.5 + 20, `pages: ${spreadPlan.pages} across 10 priorities, ${flatPlan.pages} flat`);
      // A rate-limited claim reads the backlog through indexes only, planned either way.
      const limitedClaim: PlanCase[] = [['claim', ['t', 'g', 32, 'plan-check', 30_000, true]]];
      assert.deepEqual(await customPlanProblems(adminPool, statements(`"${spread}"`), limitedClaim), []);
      assert.deepEqual(await genericPlanProblems(adminPool, statements(`"${spread}"`), limitedClaim), []);
    } finally {
      for (const st of own) await st.close();
      await dropSchema(flat);
      await dropSchema(spread);
    }
  });
});

type Node = { 'Node Type': string; 'Index Name'?: string; 'Relation Name'?: string; 'Parent Relationship'?: string; 'Actual Rows'?: number; Plans?: Node[] };

/**
 * Runs a claim of 32 on (t, g) of `schema` under EXPLAIN ANALYZE, rolled
 * back: the node types that read deliveries_pending, every Sort node with a
 * read of the backlog below it (in its own subtree, not in a subquery's: any
 * read of deliveries but the expired leases', which are few and sorted by
 * design), the pages it touched and the claimed rows' priorities.
 */
async function explainClaim(schema: string, rateLimited: boolean): Promise<{ pendingScans: string[]; sortsOverBacklog: string[]; pages: number; rows: number; priorities: number[] }> {
  const c = await adminPool.connect();
  try {
    await c.query('BEGIN');
    const res = await c.query<{ 'QUERY PLAN': Array<{ Plan: Node & { 'Shared Hit Blocks': number; 'Shared Read Blocks': number } }> }>(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${statements(`"${schema}"`).claim}`,
      ['t', 'g', 32, 'plan-check', 30_000, rateLimited],
    );
    const claimed = await c.query<{ priority: number }>(`SELECT priority FROM "${schema}".deliveries WHERE holder = 'plan-check' ORDER BY message_seq`);
    await c.query('ROLLBACK');
    const root = res.rows[0]!['QUERY PLAN'][0]!.Plan;
    const readsPending = (n: Node) => n['Index Name'] === 'deliveries_pending';
    const readsBacklog = (n: Node) => n['Relation Name'] === 'deliveries' && n['Index Name'] !== 'deliveries_leased';
    const pendingScans: string[] = [];
    const sortsOverBacklog: string[] = [];
    /** Whether `n`'s own subtree (a subquery's plan hangs below as InitPlan or SubPlan: left out) reads the backlog. */
    const below = (n: Node): boolean => readsBacklog(n) || (n.Plans ?? []).some((k) => !/^(InitPlan|SubPlan)$/.test(k['Parent Relationship'] ?? '') && below(k));
    const walk = (n: Node) => {
      if (readsPending(n)) pendingScans.push(n['Node Type']);
      if (n['Node Type'] === 'Sort' && below(n)) sortsOverBacklog.push(`Sort of ${n['Actual Rows']} rows`);
      for (const k of n.Plans ?? []) walk(k);
    };
    walk(root);
    return { pendingScans, sortsOverBacklog, pages: root['Shared Hit Blocks'] + root['Shared Read Blocks'], rows: root['Actual Rows'] ?? 0, priorities: claimed.rows.map((r) => r.priority) };
  } finally {
    c.release();
  }
}
