/**
 * Plan checks for the Postgres store's statements: EXPLAIN (without running)
 * a statement with given values, either as the planner plans it for those
 * values (a custom plan) or as the store's own connections run it (a generic
 * plan, planned once per connection without the values: the store's pools
 * connect with `plan_cache_mode=force_generic_plan`), and list every node
 * whose cost grows with a table rather than with the rows the statement
 * touches:
 * - a Seq Scan;
 * - a Bitmap Index Scan with no index condition (it reads its whole index,
 *   a partial one included), or one on an index that is not unique: a
 *   bitmap cannot stop at a LIMIT, so on the backlog's indexes it reads
 *   every matching row. On a unique index it finds keys the statement names
 *   (`message_seq = ANY(...)`, a topic's groups), which the planner may
 *   fetch through a bitmap rather than one index scan per key: the same
 *   pages either way. Nor on `acked_spans_seqs` with a condition: it finds
 *   the spans of acks that cover one seq, a handful whatever the table's
 *   size (migration 13);
 * - a Hash Join or Merge Join with a table read below it (joins of CTE
 *   results and unnested arrays are the statement's own small inputs).
 *
 * Estimated costs are not checked: the store's connections run without JIT
 * (`POSTGRES_SESSION_OPTIONS`), and a claim's estimate passes the default
 * `jit_above_cost` at about ten million pending rows, custom plan or generic.
 */
import type pg from 'pg';
// pg's own conversion of a bound value to the text it sends.
// @ts-expect-error pg/lib/utils has no type declarations
import pgUtils from 'pg/lib/utils.js';

/** One plan node that grows with a table. */
export interface PlanProblem {
  statement: string;
  node: string;
  relation?: string;
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  'Parent Relationship'?: string;
  Plans?: PlanNode[];
}

/** Node types that read a table's rows. */
const TABLE_READS = new Set(['Seq Scan', 'Index Scan', 'Index Only Scan', 'Bitmap Heap Scan']);
/** Non-unique indexes whose bitmap scan, given a condition, finds a bounded set of rows (see above). */
const BOUNDED_BITMAPS = new Set(['acked_spans_seqs']);

/** A statement of the store and the values to EXPLAIN it with. */
export type PlanCase = [statement: string, values: unknown[]];

/** The problems of `cases` planned for their values (custom plans). */
export async function customPlanProblems(pool: pg.Pool, sql: Record<string, string>, cases: PlanCase[]): Promise<PlanProblem[]> {
  const unique = await uniqueIndexes(pool);
  const problems: PlanProblem[] = [];
  for (const [statement, values] of cases) {
    const res = await pool.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) ${sql[statement]}`, values);
    problems.push(...nodeProblems(statement, res.rows[0]!['QUERY PLAN'][0]!.Plan, unique));
  }
  return problems;
}

/**
 * The problems of `cases` in the generic plans the store's connections use:
 * each statement is PREPAREd on a connection set as the store's are, then
 * EXPLAINed through EXECUTE with its values as literals (so it is costed as
 * a generic plan, exactly as the store's named statements run).
 */
export async function genericPlanProblems(pool: pg.Pool, sql: Record<string, string>, cases: PlanCase[]): Promise<PlanProblem[]> {
  const unique = await uniqueIndexes(pool);
  const c = await pool.connect();
  const problems: PlanProblem[] = [];
  try {
    await c.query('SET plan_cache_mode = force_generic_plan; SET jit = off');
    for (const [statement, values] of cases) {
      await c.query(`PREPARE ferry_plan_check AS ${sql[statement]}`);
      try {
        const args = values.length === 0 ? '' : `(${values.map((v) => literal(c, v)).join(', ')})`;
        const res = await c.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) EXECUTE ferry_plan_check${args}`);
        problems.push(...nodeProblems(statement, res.rows[0]!['QUERY PLAN'][0]!.Plan, unique));
      } finally {
        await c.query('DEALLOCATE ferry_plan_check');
      }
    }
  } finally {
    await c.query('RESET plan_cache_mode; RESET jit').catch(() => undefined);
    c.release();
  }
  return problems;
}

/** `v` as an SQL literal of the text pg would bind for it (its type comes from the PREPAREd statement). */
function literal(c: pg.PoolClient, v: unknown): string {
  const text: unknown = pgUtils.prepareValue(v);
  if (text === null || text === undefined) return 'NULL';
  if (Buffer.isBuffer(text)) return `'\\x${text.toString('hex')}'`;
  return c.escapeLiteral(String(text));
}

/** Names of the unique indexes of every schema (EXPLAIN names an index without its schema). */
async function uniqueIndexes(pool: pg.Pool): Promise<Set<string>> {
  const res = await pool.query<{ name: string }>(`SELECT c.relname AS name FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indisunique`);
  return new Set(res.rows.map((r) => r.name));
}

function nodeProblems(statement: string, root: PlanNode, unique: Set<string>): PlanProblem[] {
  const problems: PlanProblem[] = [];
  /** Whether a table is read below `n` in its own subtree (a subquery hangs below as InitPlan or SubPlan: left out). */
  const readsTable = (n: PlanNode): boolean =>
    (n.Plans ?? []).some((k) => !/^(InitPlan|SubPlan)$/.test(k['Parent Relationship'] ?? '') && (TABLE_READS.has(k['Node Type']) || readsTable(k)));
  const walk = (n: PlanNode) => {
    const type = n['Node Type'];
    if (type === 'Seq Scan') problems.push({ statement, node: type, relation: n['Relation Name'] });
    if (type === 'Bitmap Index Scan' && !((unique.has(n['Index Name'] ?? '') || BOUNDED_BITMAPS.has(n['Index Name'] ?? '')) && n['Index Cond'])) {
      problems.push({ statement, node: `${type} on ${n['Index Name']}${n['Index Cond'] ? ` (${n['Index Cond']})` : ', whole index'}` });
    }
    if ((type === 'Hash Join' || type === 'Merge Join') && readsTable(n)) problems.push({ statement, node: `${type} over a table read` });
    for (const k of n.Plans ?? []) walk(k);
  };
  walk(root);
  return problems;
}
