-- Creates the rows of topics $1 (distinct, any order) and locks them until
-- the transaction ends. ON CONFLICT DO UPDATE ... WHERE false locks an
-- existing row without writing a new version of it; ORDER BY makes every
-- transaction take the locks in the same order, so two never deadlock.
INSERT INTO __SCHEMA__.topics (topic)
SELECT t FROM unnest($1::text[]) AS t ORDER BY t
ON CONFLICT (topic) DO UPDATE SET topic = excluded.topic WHERE false
