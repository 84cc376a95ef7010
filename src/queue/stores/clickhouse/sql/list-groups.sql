-- The registered (not removed) groups of every topic when {all} is 1, else of
-- topic {topic}, sorted by topic then group (bytes: names are ASCII, so this
-- is code-unit order).
SELECT topic, grp FROM (
  SELECT topic, grp, argMax(deleted, ver) AS l_deleted
  FROM __DB__.groups WHERE {all} = 1 OR topic = {topic}
  GROUP BY topic, grp
) WHERE l_deleted = 0
ORDER BY topic, grp
