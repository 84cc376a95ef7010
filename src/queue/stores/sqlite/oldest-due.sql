-- When the longest-waiting claimable delivery of group @grp on topic @topic
-- that has a row became claimable (null: none is at @now), for stats' oldest
-- pending age: a pending one at its due time or backoff's end, whichever is
-- later, a leased one at its lease's expiry. Blocked rows count too (a lane's
-- backlog is waiting): those of the claim's index (ferry_deliveries_heads),
-- then the blocked ones through the lane index, which are all pending.
SELECT min(t) FROM (
  SELECT min(CASE WHEN d.state = 0 /* pending */ THEN max(d.available_at, m.due_at) ELSE d.lease_until END) AS t
  FROM ferry_deliveries d JOIN ferry_messages m ON m.seq = d.message_seq
  WHERE d.topic = @topic AND d.grp = @grp AND d.state < 2 /* acked */ AND d.blocked = 0
    AND ((d.state = 0 /* pending */ AND d.available_at <= @now AND m.due_at <= @now) OR (d.state = 1 /* leased */ AND d.lease_until <= @now))
  UNION ALL
  SELECT min(max(d.available_at, m.due_at))
  FROM ferry_deliveries d JOIN ferry_messages m ON m.seq = d.message_seq
  WHERE d.topic = @topic AND d.grp = @grp AND d.state < 2 /* acked */ AND d.msg_key IS NOT NULL AND d.blocked = 1
    AND d.available_at <= @now AND m.due_at <= @now)
