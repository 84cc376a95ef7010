-- Deletes up to $2 dead deliveries that died more than $1 ms ago.
DELETE FROM __SCHEMA__.deliveries
WHERE delivery_id IN (
  SELECT delivery_id FROM __SCHEMA__.deliveries
  WHERE state = 3 /* dead */ AND finished_at < (SELECT clock_timestamp()) - $1 * interval '1 millisecond'
  ORDER BY finished_at
  LIMIT $2
  FOR UPDATE SKIP LOCKED
)
