-- One page of a new `earliest` group's backfill: retained messages of topic
-- {topic} after sequence number {after}, in publish order, at most {limit}.
-- Filtering on seq before taking the latest version is sound: every version
-- of one incarnation of a message carries the same seq.
SELECT id, l_seq, l_key, l_deliver_at FROM (
  SELECT id, argMax(seq, ver) AS l_seq, argMax(msg_key, ver) AS l_key,
         argMax(deliver_at, ver) AS l_deliver_at, argMax(deleted, ver) AS l_deleted
  FROM __DB__.messages
  WHERE topic = {topic} AND seq > {after}
  GROUP BY id
) WHERE l_deleted = 0
ORDER BY l_seq
LIMIT {limit}
