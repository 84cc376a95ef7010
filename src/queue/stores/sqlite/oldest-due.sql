-- When the longest-waiting claimable delivery of group @grp on topic @topic
-- that has a row became claimable (null: none is at @now), for stats' oldest
-- pending age: a pending one at its due time or backoff's end, whichever is
-- later, a leased one at its lease's expiry.
SELECT min(CASE WHEN d.state = 0 /* pending */ THEN max(d.available_at, m.due_at) ELSE d.lease_until END)
FROM ferry_deliveries d JOIN ferry_messages m ON m.seq = d.message_seq
WHERE d.topic = @topic AND d.grp = @grp AND d.state < 2 /* acked */
  AND ((d.state = 0 /* pending */ AND d.available_at <= @now AND m.due_at <= @now) OR (d.state = 1 /* leased */ AND d.lease_until <= @now))
