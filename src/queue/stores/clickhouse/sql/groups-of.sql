-- The groups registered (and not removed) on topics {topics}.
SELECT topic, grp FROM (
  SELECT topic, grp, argMax(deleted, ver) AS l_deleted
  FROM __DB__.groups WHERE topic IN {topics}
  GROUP BY topic, grp
) WHERE l_deleted = 0
