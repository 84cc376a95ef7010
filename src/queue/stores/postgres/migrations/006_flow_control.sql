-- Pause, rate limits and priorities (Queue.pauseGroup, the rateLimit
-- subscribe option, Message.priority). Existing rows keep their meaning:
-- every group runs (not paused), every message and delivery has priority 0.
-- ADD COLUMN with a constant default rewrites no table (PostgreSQL 11 on).

-- A paused group's claims lease nothing. The flag is read by every claim
-- and written only by setGroupPaused; no index names it, so that update is
-- a HOT update of the group's row.
ALTER TABLE __SCHEMA__.groups ADD COLUMN paused boolean NOT NULL DEFAULT false;

-- Higher first, then publish order. A delivery carries its message's
-- priority so the claim's index can order by it; the message keeps it for
-- deliveries made later (a backfill) and for listMessages (redrive).
-- Nothing updates it after the insert, so it adds no column a claim,
-- heartbeat or retry changes to any index (their updates stay as HOT as
-- before).
ALTER TABLE __SCHEMA__.messages ADD COLUMN priority integer NOT NULL DEFAULT 0;
ALTER TABLE __SCHEMA__.deliveries ADD COLUMN priority integer NOT NULL DEFAULT 0;

-- Claims walk a group's pending rows in claim order, priority first: a
-- claim reads the first rows of this index and stops, whatever the
-- backlog's size or its spread over priorities (no sort of the backlog).
-- Same name, columns and predicate as migration 3's, with priority before
-- publish order; every existing row is 0, so the order of a schema without
-- priorities is unchanged.
DROP INDEX __SCHEMA__.deliveries_pending;
CREATE INDEX deliveries_pending ON __SCHEMA__.deliveries (topic, grp, priority DESC, message_seq) WHERE state = 0 /* pending */;

-- Rate limits: the claims of each group, one row per claim that leased
-- something: when (database clock, the claim's own reading) and how many
-- deliveries it started. A rate-limited claim locks its group's row, sums
-- the rows of the last interval, leases at most the rest and adds its own
-- row; rows older than the interval are deleted by the next such claim, so
-- a group keeps at most one interval's claims. remove-group deletes a
-- group's rows. Written and deleted constantly: vacuumed early.
CREATE TABLE __SCHEMA__.claim_starts (
  topic text NOT NULL,
  grp text NOT NULL,
  started_at timestamptz NOT NULL,
  n integer NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
CREATE INDEX claim_starts_group ON __SCHEMA__.claim_starts (topic, grp, started_at);
