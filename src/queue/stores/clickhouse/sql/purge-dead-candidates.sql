-- Up to {batch} dead deliveries that died before {cutoff}, oldest first,
-- across every topic. Read without a lock; each topic's share is checked
-- again under its lock by tombstone-deliveries.sql.
SELECT topic, delivery_id FROM (
  SELECT topic, grp, delivery_id, argMax(state, ver) AS l_state, argMax(finished_at, ver) AS l_finished_at
  FROM __DB__.deliveries
  GROUP BY topic, grp, delivery_id
) WHERE l_state = 3 AND l_finished_at < {cutoff}
ORDER BY l_finished_at
LIMIT {batch}
