-- Makes the pending delivery @id of message @seq (topic @topic, key @key,
-- priority @priority) to group @grp, available from @availableAt: the
-- message's deliver_at, or 0 (at once). One already made stays as it is.
INSERT INTO ferry_deliveries (delivery_id, message_seq, topic, grp, msg_key, state, available_at, priority)
VALUES (@id, @seq, @topic, @grp, @key, 0 /* pending */, @availableAt, @priority)
ON CONFLICT DO NOTHING
