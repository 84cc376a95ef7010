-- The groups registered on topics $1, with each topic's groups_version (one
-- row per topic and group; a topic without groups gives one row whose grp
-- is null); read after lock-topics, so no group can appear or go, and no
-- version change, before this transaction commits.
SELECT t.topic, t.groups_version::text AS version, g.grp
FROM __SCHEMA__.topics t
LEFT JOIN __SCHEMA__.groups g ON g.topic = t.topic
WHERE t.topic = ANY($1::text[])
