-- Inserts a backfill page's deliveries for group $2 on topic $1: $3 message
-- sequence numbers, $4 delivery ids. FOR KEY SHARE keeps the janitor from
-- deleting these messages until the new deliveries commit, and a message it
-- deleted meanwhile is skipped: no delivery ever names a message that is
-- gone (nothing else enforces it; migration 10).
--
-- Within the page, a keyed row is flagged `blocked` behind an earlier row
-- of its lane and that row marked `blocks_next`, as append.sql does within
-- a batch (migration 9).
WITH kept AS (
  SELECT b.delivery_id, m.seq, m.topic, m.msg_key, m.deliver_at, m.priority
  FROM unnest($3::bigint[], $4::text[]) AS b(seq, delivery_id)
  JOIN __SCHEMA__.messages m ON m.seq = b.seq AND m.topic = $1
  FOR KEY SHARE OF m
)
INSERT INTO __SCHEMA__.deliveries (delivery_id, message_seq, topic, grp, msg_key, state, available_at, priority, blocked, blocks_next)
SELECT k.delivery_id, k.seq, k.topic, $2::text, k.msg_key, 0 /* pending */, coalesce(k.deliver_at, '-infinity'), k.priority,
       k.msg_key IS NOT NULL AND row_number() OVER lane > 1,
       k.msg_key IS NOT NULL AND row_number() OVER lane < count(*) OVER lane
FROM kept k
WINDOW lane AS (PARTITION BY k.msg_key ORDER BY k.seq ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
ORDER BY k.seq
ON CONFLICT DO NOTHING
