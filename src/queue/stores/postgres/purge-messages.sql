-- Deletes up to $2 messages no delivery needs any more: due more than $1 ms
-- ago and with every delivery acked more than $1 ms ago. Their deliveries go
-- with them (ON DELETE CASCADE).
WITH cutoff AS MATERIALIZED (
  SELECT clock_timestamp() - $1 * interval '1 millisecond' AS at
),
victims AS (
  SELECT m.seq FROM __SCHEMA__.messages m
  WHERE m.due_at < (SELECT at FROM cutoff)
    AND NOT EXISTS (
      SELECT 1 FROM __SCHEMA__.deliveries d
      WHERE d.message_seq = m.seq AND (d.state <> 2 OR d.finished_at >= (SELECT at FROM cutoff)))
  ORDER BY m.due_at
  LIMIT $2
  FOR UPDATE OF m SKIP LOCKED
)
DELETE FROM __SCHEMA__.messages m USING victims v WHERE m.seq = v.seq
