-- The groups registered on topics $1; read after lock-topics, so no group
-- can appear before this transaction commits.
SELECT topic, grp FROM __SCHEMA__.groups WHERE topic = ANY($1::text[])
