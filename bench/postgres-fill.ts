/**
 * Fills a Postgres queue schema with synthetic rows straight through SQL, for
 * the claim benchmark and the plan checks (test/queue/postgres-plans.test.ts): `pending` due deliveries and
 * `finished` acked ones (a span of acks per 100 in acked_spans, as acks of 100 write them) for (topic, group), with payloads of `payloadBytes`
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
      // An acked delivery leaves its row (migration 4): its ack is recorded in a span of acks (migration 13).
      await pool.query(
        state === 2
          ? `WITH m AS (
               INSERT INTO ${s}.messages (id, topic, payload, published_at, due_at)
               SELECT 'fill-' || $3::int || '-' || (g + $4::int), $1, $6::bytea, now(), now()
               FROM generate_series(1, $5::int) g
               RETURNING seq, id)
             INSERT INTO ${s}.acked_spans (first_seq, last_seq, finished_at)
             SELECT min(m.seq), max(m.seq), now() FROM m WHERE $2::text IS NOT NULL GROUP BY m.seq / 100`
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
  await pool.query(`ANALYZE ${s}.acked_spans`);
}
