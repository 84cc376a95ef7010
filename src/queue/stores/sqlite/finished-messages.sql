-- Up to @limit messages the janitor may delete, oldest due first: due before
-- @cutoff, passed by the cursor of every group of their topic (no delivery
-- is still to be made), and every delivery of them acked before @cutoff.
SELECT seq FROM ferry_messages m
WHERE m.due_at < @cutoff
  AND NOT EXISTS (SELECT 1 FROM ferry_groups g WHERE g.topic = m.topic AND g.cursor_seq < m.seq)
  AND NOT EXISTS (
    SELECT 1 FROM ferry_deliveries d WHERE d.message_seq = m.seq AND (d.state <> 2 /* acked */ OR d.finished_at >= @cutoff))
ORDER BY m.due_at LIMIT @limit
