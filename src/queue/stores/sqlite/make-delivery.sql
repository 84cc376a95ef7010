-- Makes the pending delivery @id of message @seq (topic @topic, key @key,
-- priority @priority) to group @grp, available from @availableAt: the
-- message's deliver_at, or 0 (at once). One already made stays as it is.
-- Blocked when an earlier delivery of its key is live: it waits for
-- unblock-lane.sql. (Rows are made in publish order, so no later one of its
-- key exists yet.)
INSERT INTO ferry_deliveries (delivery_id, message_seq, topic, grp, msg_key, state, available_at, priority, blocked)
VALUES (@id, @seq, @topic, @grp, @key, 0 /* pending */, @availableAt, @priority, @key IS NOT NULL AND EXISTS (
  SELECT 1 FROM ferry_deliveries e
  WHERE e.topic = @topic AND e.grp = @grp AND e.msg_key = @key AND e.state < 2 /* acked */ AND e.message_seq < @seq))
ON CONFLICT DO NOTHING
