-- Stores one message; an ID already stored changes nothing, so publishing is
-- idempotent. Its seq is one past the larger of the newest stored seq and the
-- highest seq the janitor ever purged (ferry_meta.purged_seq), so a seq is
-- never reused and a group cursor never lies past a message it has not seen
-- (migrations/004). Both reads touch only pages the insert writes anyway or
-- that stay clean. @dueAt is @deliverAt when scheduled, else @publishedAt;
-- @priority is the message's (0 when it has none).
INSERT INTO ferry_messages (seq, id, topic, msg_key, payload, headers, published_at, deliver_at, due_at, priority)
VALUES (
  max(coalesce((SELECT max(seq) FROM ferry_messages), 0), coalesce((SELECT value FROM ferry_meta WHERE name = 'purged_seq'), 0)) + 1,
  @id, @topic, @key, @payload, @headers, @publishedAt, @deliverAt, @dueAt, @priority)
ON CONFLICT (id) DO NOTHING
