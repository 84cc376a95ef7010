-- Up to $3 messages of topic $1 after sequence $2, in publish order (the
-- messages_topic index). Sequence numbers on a topic are handed out in
-- commit order (appends lock the topic's row), so a later page never misses
-- a message committed after an earlier page was read.
-- (The cursor goes out as text; ORDER BY names the column through m, not
-- the text alias, which would sort "10" before "9".) Payloads as base64, as
-- in claim.sql.
SELECT m.seq::text AS seq, m.id, m.topic, m.msg_key, encode(m.payload, 'base64') AS payload, m.headers, m.published_at, m.deliver_at, m.priority
FROM __SCHEMA__.messages m
WHERE m.topic = $1 AND m.seq > $2
ORDER BY m.seq
LIMIT $3
