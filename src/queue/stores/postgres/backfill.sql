-- Inserts a backfill page's deliveries for group $2 on topic $1: $3 message
-- sequence numbers, $4 delivery ids. FOR KEY SHARE keeps the janitor from
-- deleting these messages until the new deliveries commit; a message it
-- deleted meanwhile is skipped rather than failing the foreign key.
INSERT INTO __SCHEMA__.deliveries (delivery_id, message_seq, topic, grp, msg_key, state, available_at, priority)
SELECT b.delivery_id, m.seq, m.topic, $2::text, m.msg_key, 0 /* pending */, coalesce(m.deliver_at, '-infinity'), m.priority
FROM unnest($3::bigint[], $4::text[]) AS b(seq, delivery_id)
JOIN __SCHEMA__.messages m ON m.seq = b.seq AND m.topic = $1
ORDER BY m.seq
FOR KEY SHARE OF m
ON CONFLICT DO NOTHING
