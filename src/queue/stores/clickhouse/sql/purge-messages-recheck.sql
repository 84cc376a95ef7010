-- Which of candidate messages {ids} on topic {topic} still need nothing
-- (see purge-message-candidates.sql), read under the topic's lock, so no
-- backfill can give one of them a new delivery before it is purged.
SELECT id FROM (
  SELECT id, argMax(due_at, ver) AS l_due_at, argMax(deleted, ver) AS l_deleted
  FROM __DB__.messages
  WHERE topic = {topic} AND id IN {ids}
  GROUP BY id
) WHERE l_deleted = 0 AND l_due_at < {cutoff}
  AND id NOT IN (
    SELECT l_message_id FROM (
      SELECT topic, grp, delivery_id, argMax(message_id, ver) AS l_message_id, argMax(state, ver) AS l_state,
             argMax(finished_at, ver) AS l_finished_at
      FROM __DB__.deliveries
      WHERE topic = {topic} AND message_id IN {ids}
      GROUP BY topic, grp, delivery_id
    ) WHERE l_state < 2 OR l_state = 3 OR (l_state = 2 AND l_finished_at >= {cutoff})
  )
