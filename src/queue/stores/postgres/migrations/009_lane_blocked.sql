-- Keyed deliveries waiting behind their lane's head may be flagged
-- `blocked`, and the keyed pending index holds only the unflagged ones: the
-- lanes' heads, and rows behind a head that nobody flagged (a claim still
-- tests every row it takes for headship, so a missing flag costs a probe,
-- never order). A claim reads heads off that index in claim order. Before,
-- with a backlog published key by key (1,000 keys of 50), the index's first
-- rows were all one lane's, and every claim walked every lane through
-- deliveries_lane instead: 1,000 index descents per claim.
--
-- A flagged row always has a live row ahead of it in its lane, and the row
-- just ahead of it carries `blocks_next`:
-- - append.sql flags a new row only when an earlier row of its lane is in
--   the same batch (they commit together, and a topic's batches never
--   interleave their seqs), and marks that earlier row `blocks_next`;
--   backfill.sql does the same within each page of a new group's backfill;
--   this migration flags every live row that is not its lane's first.
-- - When a row marked `blocks_next` leaves the live rows (deleted by an ack
--   or with its group, or dead-lettered) the triggers below clear the flag
--   of its lane's new head. Rows leave a lane from its head (only a head is
--   leased; a group's removal takes the whole lane), so the row that leaves
--   just ahead of a flagged row is the one marked for it. The trigger's
--   statement takes its own snapshot: it sees every row committed before it
--   ran. A lane without flags, the common case for messages published one
--   at a time or one per key per batch, never runs it.
-- - A lease clears the flag of the row it takes (claim.sql, ack-and-claim.sql):
--   a flagged row a claim can lease is one an ack in the same statement
--   freed, or a head the lane walk (which does not read flags) found.
ALTER TABLE __SCHEMA__.deliveries ADD COLUMN blocked boolean NOT NULL DEFAULT false,
  ADD COLUMN blocks_next boolean NOT NULL DEFAULT false;

-- Existing rows: every live keyed row but its lane's first is flagged, and
-- every one but its lane's last marked.
UPDATE __SCHEMA__.deliveries d
SET blocked = EXISTS (
      SELECT 1 FROM __SCHEMA__.deliveries e
      WHERE e.topic = d.topic AND e.grp = d.grp AND e.msg_key = d.msg_key AND e.state < 2 /* acked */
        AND e.message_seq < d.message_seq),
    blocks_next = EXISTS (
      SELECT 1 FROM __SCHEMA__.deliveries e
      WHERE e.topic = d.topic AND e.grp = d.grp AND e.msg_key = d.msg_key AND e.state < 2 /* acked */
        AND e.message_seq > d.message_seq)
WHERE d.state < 2 /* acked */ AND d.msg_key IS NOT NULL;

DROP INDEX __SCHEMA__.deliveries_pending_keyed;
CREATE INDEX deliveries_pending_keyed ON __SCHEMA__.deliveries (topic, grp, priority DESC, message_seq)
  WHERE state = 0 /* pending */ AND msg_key IS NOT NULL AND NOT blocked;

-- Clears the flag of the head of OLD's lane, if it has one and it is
-- flagged (a row dead-lettered: one row at a time, and rarely).
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

CREATE TRIGGER deliveries_lane_finished AFTER UPDATE OF state ON __SCHEMA__.deliveries
  FOR EACH ROW WHEN (OLD.state < 2 /* acked */ AND NEW.state >= 2 /* acked */ AND OLD.blocks_next)
  EXECUTE FUNCTION __SCHEMA__.unblock_lane();

-- The same for every lane a DELETE statement (acks, a group's removal) took
-- a marked row out of, once per statement: one query over the deleted rows
-- and a lane probe per marked one, where a trigger per row cost a function
-- call and a statement each (about 50 µs per ack of a key-by-key backlog).
-- A lane head the deleting statement leased itself has no flag left.
CREATE FUNCTION __SCHEMA__.unblock_lanes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE __SCHEMA__.deliveries d SET blocked = false
  WHERE d.blocked AND d.delivery_id = ANY(ARRAY(
    SELECT h.delivery_id
    FROM (SELECT DISTINCT g.topic, g.grp, g.msg_key FROM gone g WHERE g.state < 2 /* acked */ AND g.blocks_next) l
    CROSS JOIN LATERAL (
      SELECT e.delivery_id FROM __SCHEMA__.deliveries e
      WHERE e.topic = l.topic AND e.grp = l.grp AND e.msg_key = l.msg_key AND e.state < 2 /* acked */
      ORDER BY e.message_seq
      LIMIT 1) h));
  RETURN NULL;
END
$$;

CREATE TRIGGER deliveries_lanes_deleted AFTER DELETE ON __SCHEMA__.deliveries
  REFERENCING OLD TABLE AS gone
  FOR EACH STATEMENT EXECUTE FUNCTION __SCHEMA__.unblock_lanes();
