/**
 * Fills a Postgres queue schema with synthetic rows straight through SQL, for
 * the claim benchmark and the claim plan check: `pending` due deliveries and
 * `finished` acked ones (records in acks) for (topic, group), with payloads of `payloadBytes`
 * (default 4). With `priorities` above 1 the pending rows take priorities 0
 * to `priorities` - 1 in turn, so that each priority's rows are spread over
 * the whole backlog in publish order. Runs an
 * ANALYZE afterwards so the planner sees the table as it is.
 */
import type pg from 'pg';

export async function fillSchema(pool: pg.Pool, schema: string, topic: string, group: string, pending: number, finished: number, payloadBytes = 4, priorities = 1): Promise<void> {
  const s = `"${schema}"`;
  await pool.query(`INSERT INTO ${s}.topics (topic) VALUES ($1) ON CONFLICT DO NOTHING`, [topic]);
  await pool.query(`INSERT INTO ${s}.groups (topic, grp) VALUES ($1, $2) ON CONFLICT DO NOTHING`, [topic, group]);
  const chunk = 200_000;
  // Finished rows first: they are the old ones, lowest in publish order.
  for (const [total, state] of [
    [finished, 2],
    [pending, 0],
  ] as const) {
    for (let from = 0; from < total; from += chunk) {
      const n = Math.min(chunk, total - from);
      // An acked delivery leaves its row (migration 4): it is a record in acks.
      await pool.query(
        state === 2
          ? `WITH m AS (
               INSERT INTO ${s}.messages (id, topic, payload, published_at, due_at)
               SELECT 'fill-' || $3::int || '-' || (g + $4::int), $1, $6::bytea, now(), now()
               FROM generate_series(1, $5::int) g
               RETURNING seq, id)
             INSERT INTO ${s}.acks (message_seq, finished_at)
             SELECT m.seq, now() FROM m WHERE $2::text IS NOT NULL`
          : `WITH m AS (
               INSERT INTO ${s}.messages (id, topic, payload, published_at, due_at, priority)
               SELECT 'fill-' || $3::int || '-' || (g + $4::int), $1, $6::bytea, now(), now(), (g + $4::int) % $7::int
               FROM generate_series(1, $5::int) g
               RETURNING seq, id, priority)
             INSERT INTO ${s}.deliveries (delivery_id, message_seq, topic, grp, state, attempt, available_at, priority)
             SELECT m.id || '/' || $2, m.seq, $1, $2, $3::smallint, 0, '-infinity', m.priority
             FROM m`,
        [topic, group, state, from, n, payloadBytes === 4 ? Buffer.from([0, 1, 2, 3]) : Buffer.alloc(payloadBytes, 120), ...(state === 2 ? [] : [priorities])],
      );
    }
  }
  await pool.query(`ANALYZE ${s}.messages`);
  await pool.query(`ANALYZE ${s}.deliveries`);
  await pool.query(`ANALYZE ${s}.acks`);
}

/** One plan node that reads a table some other way than through an index. */
export interface PlanProblem {
  statement: string;
  node: string;
  relation?: string;
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Total Cost'?: number;
  Plans?: PlanNode[];
}

/** Node types that read or join whole tables: none may appear in a hot statement's plan. */
const WHOLE_TABLE = new Set(['Seq Scan', 'Bitmap Heap Scan', 'Hash Join', 'Merge Join']);
/** Above this estimated cost Postgres JIT-compiles a query (default jit_above_cost), which costs more than a claim. */
const JIT_ABOVE_COST = 100_000;

/**
 * EXPLAINs (without running) each statement the store runs per delivery,
 * with live arguments, and lists every node that is not an index access and
 * every plan the planner would JIT-compile. `statements` is the store's
 * statement table (schema filled in); `claimed` are deliveries of
 * (topic, group) currently leased, whose IDs and tokens feed ack and friends.
 */
export async function planProblems(
  pool: pg.Pool,
  sql: Record<string, string>,
  topic: string,
  group: string,
  claimed: Array<{ deliveryId: string; claimToken: string }>,
): Promise<PlanProblem[]> {
  const ids = claimed.map((c) => c.deliveryId);
  const tokens = claimed.map((c) => c.claimToken);
  const cases: Array<[string, unknown[]]> = [
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
    ['purge-messages', [3_600_000, 500]],
    ['janitor', ['plan-check', 1000]],
    ['list-messages', [topic, '0', 257]],
  ];
  return explainProblems(pool, sql, cases);
}

/** The plan problems (see `planProblems`) of each statement of `sql` named in `cases`, EXPLAINed with its values. */
export async function explainProblems(pool: pg.Pool, sql: Record<string, string>, cases: Array<[string, unknown[]]>): Promise<PlanProblem[]> {
  const problems: PlanProblem[] = [];
  for (const [statement, values] of cases) {
    const res = await pool.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) ${sql[statement]}`, values);
    const root = res.rows[0]!['QUERY PLAN'][0]!.Plan;
    if ((root['Total Cost'] ?? 0) > JIT_ABOVE_COST) problems.push({ statement, node: `estimated cost ${root['Total Cost']} (JIT)` });
    const walk = (n: PlanNode) => {
      if (WHOLE_TABLE.has(n['Node Type'])) problems.push({ statement, node: n['Node Type'], relation: n['Relation Name'] });
      for (const c of n.Plans ?? []) walk(c);
    };
    walk(root);
  }
  return problems;
}
