-- Up to @limit messages of topic @topic past seq @after, in publish order:
-- a page of listMessages, whose cursor is the last seq of the page before.
SELECT seq, id, topic, msg_key, payload, headers, published_at, deliver_at, priority FROM ferry_messages
WHERE topic = @topic AND seq > @after
ORDER BY seq LIMIT @limit
