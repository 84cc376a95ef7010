-- Inserts a backfill page's deliveries for group $2 on topic $1: $3 message
-- sequence numbers, $4 delivery ids. The foreign key fails the insert if the
-- janitor removed a message meanwhile (the caller retries the page).
INSERT INTO __SCHEMA__.deliveries (delivery_id, message_seq, topic, grp, msg_key, state, available_at)
SELECT b.delivery_id, m.seq, m.topic, $2::text, m.msg_key, 0, coalesce(m.deliver_at, '-infinity')
FROM unnest($3::bigint[], $4::text[]) AS b(seq, delivery_id)
JOIN __SCHEMA__.messages m ON m.seq = b.seq AND m.topic = $1
ORDER BY m.seq
ON CONFLICT DO NOTHING
