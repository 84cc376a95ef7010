-- Up to @limit messages of topic @topic past seq @after, in publish order:
-- those whose deliveries a claim makes when it moves its group's cursor on.
-- `@limit + 0`: see claimable.sql.
SELECT seq, id, msg_key, deliver_at, priority FROM ferry_messages
WHERE topic = @topic AND seq > @after
ORDER BY seq LIMIT @limit + 0
