-- Every registered group, by topic and name.
SELECT topic, grp AS "group" FROM ferry_groups ORDER BY topic, grp
