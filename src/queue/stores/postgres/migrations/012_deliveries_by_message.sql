-- Deliveries are keyed by (message_seq, grp), and the hash index on
-- message_seq goes. A delivery ID is derived from its message's ID and its
-- group, and a message ID names one seq, so the new key is as unique as the
-- old one; it also serves every lookup by message (the purge's "is every
-- delivery finished" probe, a group's removal) as a prefix.
--
-- What it saves: every delivery a publish inserts, and every new version a
-- claim writes (state and lease_until are in partial indexes, so a lease is
-- never a HOT update), wrote an entry in three indexes on a row's identity:
-- the primary key on a hashed ID (a random leaf page per row), the hash
-- index on message_seq (a random bucket per row) and, with the lease, the
-- leased index. Now it is one key, in publish order: a publish appends at
-- its right edge, and a claim's new versions land on the few leaf pages of
-- the newest messages. In a run of 100-row claims the lease UPDATE took
-- about half its time in the hash index alone.
--
-- Fenced writes (ack, extend, release, retry, kill) find their rows by
-- message_seq: the store's claim tokens carry it ("<seq>/<uuid>", rows.ts),
-- and the uuid, unique to one claim of one delivery, still fences each
-- write. A claim token handed out before this migration has no seq: its
-- write finds nothing, as a stale token's does, and the delivery is claimed
-- again once its lease runs out.
ALTER TABLE __SCHEMA__.deliveries DROP CONSTRAINT deliveries_pkey;
ALTER TABLE __SCHEMA__.deliveries ADD CONSTRAINT deliveries_pkey PRIMARY KEY (message_seq, grp);
DROP INDEX __SCHEMA__.deliveries_message;

-- The lane triggers of migration 9 named a lane's head by its delivery ID;
-- the one left names it by its key. It runs for a row that leaves the live
-- rows (dead-lettered, or deleted) while rows wait flagged behind it, unless
-- the statement that made it leave moved the lane on itself and said so
-- (ack.sql, ack-and-claim.sql; migration 11).
CREATE OR REPLACE FUNCTION __SCHEMA__.unblock_lane() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF current_setting('ferry.lanes_unblocked_at', true) = statement_timestamp()::text THEN
    RETURN NULL;
  END IF;
  UPDATE __SCHEMA__.deliveries d SET blocked = false
  WHERE d.blocked AND d.grp = OLD.grp AND d.message_seq = (
    SELECT e.message_seq FROM __SCHEMA__.deliveries e
    WHERE e.topic = OLD.topic AND e.grp = OLD.grp AND e.msg_key = OLD.msg_key AND e.state < 2 /* acked */
    ORDER BY e.message_seq
    LIMIT 1);
  RETURN NULL;
END
$$;

-- The DELETE trigger becomes a row trigger that fires only for a live row
-- marked `blocks_next`, as the dead-letter one does. As a statement trigger
-- it kept every row an ack deleted in a transition table and made a
-- PL/pgSQL call per ack, whatever the rows: about a tenth of an ack of 100.
-- Acks and ack-and-claims move such lanes on themselves, so for them it
-- returns at once; it stays for any other statement that deletes a lane's
-- live head.
DROP TRIGGER deliveries_lanes_deleted ON __SCHEMA__.deliveries;
DROP FUNCTION __SCHEMA__.unblock_lanes();
CREATE TRIGGER deliveries_lane_deleted AFTER DELETE ON __SCHEMA__.deliveries
  FOR EACH ROW WHEN (OLD.state < 2 /* acked */ AND OLD.blocks_next)
  EXECUTE FUNCTION __SCHEMA__.unblock_lane();
