-- Purges messages {ids} on topic {topic}: a version with deleted = 1 and an
-- empty payload for each one not purged yet.
INSERT INTO __DB__.messages (topic, id, seq, msg_key, payload, headers, published_at, deliver_at, due_at, deleted, ver)
SELECT topic, id, argMax(seq, ver), argMax(msg_key, ver), '', NULL, argMax(published_at, ver),
       argMax(deliver_at, ver), argMax(due_at, ver), 1, max(ver) + 1
FROM __DB__.messages
WHERE topic = {topic} AND id IN {ids}
GROUP BY topic, id
HAVING argMax(deleted, ver) = 0
