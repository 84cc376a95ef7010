-- Up to @limit deliveries of priority 0 (the default) of group @grp on topic
-- @topic a claim may take at @now (claimable-delivery.sql), of messages past
-- seq @after, in publish order, with their messages. One range of the
-- partial index of live rows at the head of their lane
-- (ferry_deliveries_heads: priority, then message_seq), so the cost follows
-- claimable work, however many finished rows wait for the janitor and
-- however deep a key's lane is; @after lets a claim that just made new rows
-- search only those. The limit is `@limit + 0`, an expression: SQLite (3.51,
-- built with STAT4) reads a bare bound LIMIT when it plans, so every run
-- (the driver binds anew each time) would prepare the statement again, about
-- 40 µs here, more than the walk itself.
SELECT d.delivery_id, d.attempt, d.state, m.seq, m.id, m.topic, m.msg_key, m.payload, m.headers, m.published_at, m.deliver_at, m.priority
FROM ferry_deliveries d JOIN ferry_messages m ON m.seq = d.message_seq
WHERE d.topic = @topic AND d.grp = @grp AND d.state < 2 /* acked */ AND d.priority = 0 AND d.message_seq > @after
  AND __CLAIMABLE_DELIVERY__
ORDER BY d.message_seq LIMIT @limit + 0
