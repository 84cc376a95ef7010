-- Version 6 holds what pause, rate limits and priorities need (Queue.pauseGroup,
-- the rateLimit subscribe option, Message.priority). Existing rows keep their
-- values: every group runs (paused 0), every message and delivery has
-- priority 0, no claim is on record.
--
-- ferry_groups.paused: 1 while the group is paused; a claim reads it inside
-- its own transaction.
ALTER TABLE ferry_groups ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
-- Priorities: the message's, copied to each delivery when a claim makes it.
ALTER TABLE ferry_messages ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE ferry_deliveries ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
-- Claims walk live work by priority, highest first, then in publish order
-- (claimable-by-priority.sql, claimable.sql): the live index gains priority
-- before message_seq. Made again over the live rows only.
DROP INDEX IF EXISTS ferry_deliveries_live;
CREATE INDEX IF NOT EXISTS ferry_deliveries_live ON ferry_deliveries (topic, grp, priority DESC, message_seq) WHERE state < 2 /* acked */;
-- Leased rows by group and lease end, for maxInFlight (in-flight.sql): a
-- claim counts the unexpired leases in one range however many pending rows
-- the group has (a claim that makes rows ahead, for priorities, leaves many).
CREATE INDEX IF NOT EXISTS ferry_deliveries_leased ON ferry_deliveries (topic, grp, lease_until) WHERE state = 1 /* leased */;
-- The newest message above priority 0 of a topic (newest-raised-seq.sql): a
-- claim makes the deliveries up to it before it chooses. Only raised
-- messages have an entry, so a topic that never uses priorities pays nothing.
CREATE INDEX IF NOT EXISTS ferry_messages_raised ON ferry_messages (topic, seq) WHERE priority > 0;
-- The rate limit's record: how many claims group grp of topic started at
-- each millisecond started_at (database clock), kept for one window
-- (claims-in-window.sql, record-claim-starts.sql, prune-claim-starts.sql).
CREATE TABLE IF NOT EXISTS ferry_claim_starts (
  topic TEXT NOT NULL,
  grp TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  claims INTEGER NOT NULL,
  PRIMARY KEY (topic, grp, started_at)
) WITHOUT ROWID;
