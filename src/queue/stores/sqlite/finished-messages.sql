-- Up to @limit messages the janitor may delete, in publish order: due before
-- @cutoff, passed by the cursor of every group of their topic (no delivery
-- is still to be made), and every delivery of them acked before @cutoff.
-- The walk stops at the seq of the first mark after @cutoff
-- (record-seq-mark.sql): a message stored later has every ack after the
-- cutoff, or no delivery yet. (One exception waits for a later purge: a
-- message stored after the cutoff with an earlier due time, on a topic no
-- group had reached when it was stored.) Without such a mark (no purge
-- since the cutoff), the walk may go to the newest message.
SELECT seq FROM ferry_messages m
WHERE m.seq <= coalesce((SELECT min(seq) FROM ferry_seq_marks WHERE at > @cutoff), 9223372036854775807)
  AND m.due_at < @cutoff
  AND NOT EXISTS (SELECT 1 FROM ferry_groups g WHERE g.topic = m.topic AND g.cursor_seq < m.seq)
  AND NOT EXISTS (
    SELECT 1 FROM ferry_deliveries d WHERE d.message_seq = m.seq AND (d.state <> 2 /* acked */ OR d.finished_at >= @cutoff))
ORDER BY m.seq LIMIT @limit
