-- Up to {batch} messages no delivery needs any more, across every topic:
-- due before {cutoff}, not purged, and with no delivery that is pending,
-- leased, dead, or acked at or after {cutoff}. Read without a lock; each
-- topic's share is checked again under its lock (purge-messages-recheck.sql).
SELECT topic, id FROM (
  SELECT topic, id, argMax(due_at, ver) AS l_due_at, argMax(deleted, ver) AS l_deleted
  FROM __DB__.messages
  GROUP BY topic, id
) WHERE l_deleted = 0 AND l_due_at < {cutoff}
  AND (topic, id) NOT IN (
    SELECT topic, l_message_id FROM (
      SELECT topic, grp, delivery_id, argMax(message_id, ver) AS l_message_id, argMax(state, ver) AS l_state,
             argMax(finished_at, ver) AS l_finished_at
      FROM __DB__.deliveries
      GROUP BY topic, grp, delivery_id
    ) WHERE l_state < 2 OR l_state = 3 OR (l_state = 2 AND l_finished_at >= {cutoff})
  )
ORDER BY l_due_at
LIMIT {batch}
