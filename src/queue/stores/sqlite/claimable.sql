-- Up to @limit deliveries of group @grp on topic @topic a claim may take at
-- @now, of messages past seq @after, in publish order, with their messages.
-- Claimable: pending and past its available_at, or leased with its lease run
-- out (a recovered delivery). A keyed one only at the head of its lane: no
-- earlier live delivery has its key. The partial indexes of live rows keep
-- this proportional to live work, however many finished rows wait for the
-- janitor.
SELECT d.delivery_id, d.attempt, d.state, m.seq, m.id, m.topic, m.msg_key, m.payload, m.headers, m.published_at, m.deliver_at
FROM ferry_deliveries d JOIN ferry_messages m ON m.seq = d.message_seq
WHERE d.topic = @topic AND d.grp = @grp AND d.state < 2 /* acked */ AND d.message_seq > @after
  AND ((d.state = 0 /* pending */ AND d.available_at <= @now) OR (d.state = 1 /* leased */ AND d.lease_until <= @now))
  AND (d.msg_key IS NULL OR NOT EXISTS (
    SELECT 1 FROM ferry_deliveries e
    WHERE e.topic = d.topic AND e.grp = d.grp AND e.msg_key = d.msg_key AND e.state < 2 /* acked */ AND e.message_seq < d.message_seq))
ORDER BY d.message_seq LIMIT @limit
