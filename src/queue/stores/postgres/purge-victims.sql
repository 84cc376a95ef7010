-- Chooses and locks up to $2 messages no delivery needs any more: due more
-- than $1 ms ago, with no delivery row left (pending, leased or dead) and
-- no span of acks less than $1 ms old covering its seq (acked_spans,
-- migration 13). It runs in the janitor's transaction; FOR UPDATE keeps a
-- backfill (which locks FOR KEY SHARE) away from them until that commits,
-- and SKIP LOCKED passes over a message a backfill holds.
-- purge-messages.sql then deletes them.
WITH cutoff AS MATERIALIZED (
  SELECT clock_timestamp() - $1 * interval '1 millisecond' AS at
)
SELECT m.seq FROM __SCHEMA__.messages m
WHERE m.due_at < (SELECT at FROM cutoff)
  AND NOT EXISTS (SELECT 1 FROM __SCHEMA__.deliveries d WHERE d.message_seq = m.seq)
  AND NOT EXISTS (
    SELECT 1 FROM __SCHEMA__.acked_spans a
    WHERE int8range(a.first_seq, a.last_seq, '[]') @> m.seq AND a.finished_at >= (SELECT at FROM cutoff))
ORDER BY m.due_at
LIMIT $2
FOR UPDATE OF m SKIP LOCKED
