-- The groups registered on topic @topic, by name.
SELECT topic, grp AS "group" FROM ferry_groups WHERE topic = @topic ORDER BY grp
