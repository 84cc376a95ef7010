-- Up to @limit deliveries of group @grp on topic @topic a claim may take at
-- @now (claimable-delivery.sql) whose priority is from @low to @high,
-- highest priority first, then in publish order, with their messages: the
-- raised ones (1 and up) before claimable.sql's priority 0, the lowered ones
-- (-1 and down) after. The partial index of live rows at the head of their
-- lane (ferry_deliveries_heads) holds them in this order (priority DESC,
-- message_seq), so no sort: the walk stops after @limit claimable rows.
-- `@limit + 0`: see claimable.sql.
SELECT d.delivery_id, d.attempt, d.state, m.seq, m.id, m.topic, m.msg_key, m.payload, m.headers, m.published_at, m.deliver_at, m.priority
FROM ferry_deliveries d JOIN ferry_messages m ON m.seq = d.message_seq
WHERE d.topic = @topic AND d.grp = @grp AND d.state < 2 /* acked */ AND d.priority BETWEEN @low AND @high
  AND __CLAIMABLE_DELIVERY__
ORDER BY d.priority DESC, d.message_seq LIMIT @limit + 0
