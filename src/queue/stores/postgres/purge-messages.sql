-- Deletes messages $1, which purge-victims.sql chose and locked in this
-- transaction, leaving out any that, in this statement's newer snapshot,
-- has a delivery row or a span of acks less than $2 ms old covering it: a
-- backfill may have committed a delivery for one between the choice and
-- the lock (after the lock none can until this commits; migration 10).
WITH cutoff AS MATERIALIZED (
  SELECT clock_timestamp() - $2 * interval '1 millisecond' AS at
),
gone AS (
  DELETE FROM __SCHEMA__.messages m
  WHERE m.seq = ANY($1::bigint[])
    AND NOT EXISTS (SELECT 1 FROM __SCHEMA__.deliveries d WHERE d.message_seq = m.seq)
    AND NOT EXISTS (
      SELECT 1 FROM __SCHEMA__.acked_spans a
      WHERE int8range(a.first_seq, a.last_seq, '[]') @> m.seq AND a.finished_at >= (SELECT at FROM cutoff))
  RETURNING m.seq
)
SELECT count(*)::int AS n FROM gone
