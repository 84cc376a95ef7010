-- Deletes up to $2 messages no delivery needs any more: due more than $1 ms
-- ago, with no delivery row left (pending, leased or dead) and every ack
-- more than $1 ms ago; their ack records go with them. Their deliveries
-- would go with them too (ON DELETE CASCADE): one a concurrent backfill
-- inserted after this chose the message.
WITH cutoff AS MATERIALIZED (
  SELECT clock_timestamp() - $1 * interval '1 millisecond' AS at
),
victims AS (
  SELECT m.seq FROM __SCHEMA__.messages m
  WHERE m.due_at < (SELECT at FROM cutoff)
    AND NOT EXISTS (SELECT 1 FROM __SCHEMA__.deliveries d WHERE d.message_seq = m.seq)
    AND NOT EXISTS (SELECT 1 FROM __SCHEMA__.acks a WHERE a.message_seq = m.seq AND a.finished_at >= (SELECT at FROM cutoff))
  ORDER BY m.due_at
  LIMIT $2
  FOR UPDATE OF m SKIP LOCKED
),
unlogged AS (
  DELETE FROM __SCHEMA__.acks a WHERE a.message_seq = ANY(ARRAY(SELECT seq FROM victims))
)
DELETE FROM __SCHEMA__.messages m WHERE m.seq = ANY(ARRAY(SELECT seq FROM victims))
