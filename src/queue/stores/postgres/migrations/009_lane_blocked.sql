-- Keyed deliveries waiting behind their lane's head are flagged `blocked`,
-- and the keyed pending index holds only the others: the lanes' heads (and,
-- rarely, a row whose publisher could not tell, left unflagged: a claim still
-- tests every row it takes for headship, so a missing flag costs a probe,
-- never order). A claim reads heads off that index in claim order. Before,
-- with a backlog published key by key (1,000 keys of 50), the index's first
-- rows were all one lane's, and every claim walked every lane through
-- deliveries_lane instead: 1,000 index descents per claim.
--
-- Who sets and clears it:
-- - append.sql flags a new row when an earlier row of its lane is in the
--   same batch, or when it could lock (FOR SHARE) a live row of the lane in
--   the table. That lock keeps the earlier row live until the append
--   commits, so the row that frees the new one leaves after it and sees it.
-- - The triggers below clear the flag of a lane's head whenever an unflagged
--   live row leaves the live rows (deleted by an ack, its message or its
--   group, or dead-lettered). Only an unflagged row can be a head, so
--   removing a flagged one never changes who leads. The trigger's statement
--   takes its own snapshot, after the removal's row locks were granted, so
--   it sees an append that committed while the removal waited.
-- - backfill.sql flags the rows of a new group's backfill as append.sql does
--   (the group is not visible to any claim until it commits).
ALTER TABLE __SCHEMA__.deliveries ADD COLUMN blocked boolean NOT NULL DEFAULT false;

-- Existing rows: every live keyed row that is not its lane's first.
UPDATE __SCHEMA__.deliveries d SET blocked = true
WHERE d.state < 2 /* acked */ AND d.msg_key IS NOT NULL
  AND EXISTS (
    SELECT 1 FROM __SCHEMA__.deliveries e
    WHERE e.topic = d.topic AND e.grp = d.grp AND e.msg_key = d.msg_key AND e.state < 2 /* acked */
      AND e.message_seq < d.message_seq);

DROP INDEX __SCHEMA__.deliveries_pending_keyed;
CREATE INDEX deliveries_pending_keyed ON __SCHEMA__.deliveries (topic, grp, priority DESC, message_seq)
  WHERE state = 0 /* pending */ AND msg_key IS NOT NULL AND NOT blocked;

-- Clears the flag of the head of OLD's lane, if it has one and it is flagged.
CREATE FUNCTION __SCHEMA__.unblock_lane() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE __SCHEMA__.deliveries d SET blocked = false
  WHERE d.blocked AND d.delivery_id = (
    SELECT e.delivery_id FROM __SCHEMA__.deliveries e
    WHERE e.topic = OLD.topic AND e.grp = OLD.grp AND e.msg_key = OLD.msg_key AND e.state < 2 /* acked */
    ORDER BY e.message_seq
    LIMIT 1);
  RETURN NULL;
END
$$;

CREATE TRIGGER deliveries_lane_deleted AFTER DELETE ON __SCHEMA__.deliveries
  FOR EACH ROW WHEN (OLD.state < 2 /* acked */ AND OLD.msg_key IS NOT NULL AND NOT OLD.blocked)
  EXECUTE FUNCTION __SCHEMA__.unblock_lane();

CREATE TRIGGER deliveries_lane_finished AFTER UPDATE OF state ON __SCHEMA__.deliveries
  FOR EACH ROW WHEN (OLD.state < 2 /* acked */ AND NEW.state >= 2 /* acked */ AND OLD.msg_key IS NOT NULL AND NOT OLD.blocked)
  EXECUTE FUNCTION __SCHEMA__.unblock_lane();
