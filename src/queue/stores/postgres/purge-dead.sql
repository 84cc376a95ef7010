-- Deletes up to $2 dead deliveries that died more than $1 ms ago, found
-- by ANY(ARRAY(...)) on the key's first column, then the pair (ack.sql).
WITH victims AS MATERIALIZED (
  SELECT message_seq, grp FROM __SCHEMA__.deliveries
  WHERE state = 3 /* dead */ AND finished_at < (SELECT clock_timestamp()) - $1 * interval '1 millisecond'
  ORDER BY finished_at
  LIMIT $2
  FOR UPDATE SKIP LOCKED
)
DELETE FROM __SCHEMA__.deliveries d
WHERE d.message_seq = ANY(ARRAY(SELECT message_seq FROM victims))
  AND (d.message_seq, d.grp) IN (SELECT message_seq, grp FROM victims)
