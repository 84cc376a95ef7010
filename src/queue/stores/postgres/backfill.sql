-- Inserts a backfill page's deliveries for group $2 on topic $1: $3 message
-- sequence numbers, $4 delivery ids. FOR KEY SHARE keeps the janitor from
-- deleting these messages until the new deliveries commit; a message it
-- deleted meanwhile is skipped rather than failing the foreign key.
--
-- A keyed row is flagged `blocked` (migration 9) when an earlier row of its
-- lane is in this page or in an earlier one (written by this transaction,
-- which made the group: no claim sees the group before it commits).
WITH kept AS (
  SELECT b.delivery_id, m.seq, m.topic, m.msg_key, m.deliver_at, m.priority
  FROM unnest($3::bigint[], $4::text[]) AS b(seq, delivery_id)
  JOIN __SCHEMA__.messages m ON m.seq = b.seq AND m.topic = $1
  FOR KEY SHARE OF m
),
page AS (
  SELECT k.*, k.msg_key IS NOT NULL AND row_number() OVER (PARTITION BY k.msg_key ORDER BY k.seq) > 1 AS behind
  FROM kept k
)
INSERT INTO __SCHEMA__.deliveries (delivery_id, message_seq, topic, grp, msg_key, state, available_at, priority, blocked)
SELECT p.delivery_id, p.seq, p.topic, $2::text, p.msg_key, 0 /* pending */, coalesce(p.deliver_at, '-infinity'), p.priority,
       p.behind OR (p.msg_key IS NOT NULL AND EXISTS (
         SELECT 1 FROM __SCHEMA__.deliveries e
         WHERE e.topic = $1 AND e.grp = $2::text AND e.msg_key = p.msg_key AND e.state < 2 /* acked */))
FROM page p
ORDER BY p.seq
ON CONFLICT DO NOTHING
