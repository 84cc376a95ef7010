-- Deletes up to @limit dead deliveries that died before @cutoff: the
-- janitor's retention of dead letters.
DELETE FROM ferry_deliveries WHERE (message_seq, grp) IN (
  SELECT message_seq, grp FROM ferry_deliveries WHERE state = 3 /* dead */ AND finished_at < @cutoff LIMIT @limit)
