-- Which of message IDs {ids} on topics {topics} exist and are not purged.
SELECT id FROM (
  SELECT id, argMax(deleted, ver) AS l_deleted
  FROM __DB__.messages
  WHERE topic IN {topics} AND id IN {ids}
  GROUP BY id
) WHERE l_deleted = 0
