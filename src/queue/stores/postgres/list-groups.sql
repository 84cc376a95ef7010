-- The registered groups of topic $1, or of every topic when $1 is null,
-- sorted bytewise (the names are ASCII) as every store sorts them.
SELECT topic, grp AS "group" FROM __SCHEMA__.groups
WHERE $1::text IS NULL OR topic = $1
ORDER BY topic COLLATE "C", grp COLLATE "C"
