-- One page of a new `earliest` group's backfill: retained messages of topic
-- $1 after sequence $2, in publish order, at most $3.
SELECT seq, id FROM __SCHEMA__.messages
WHERE topic = $1 AND seq > $2
ORDER BY seq
LIMIT $3
