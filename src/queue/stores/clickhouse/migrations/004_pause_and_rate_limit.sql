-- Pausing a group (Store.setGroupPaused): `paused` = 1 on the group's latest
-- version; existing groups read 0 (not paused). The runner skips this
-- statement when the column is already there.
ALTER TABLE __DB__.groups ADD COLUMN paused UInt8 DEFAULT 0
;
-- Rate limits (ClaimRequest.rateLimit): the recent claim starts of each
-- group, one row per (topic, group) and version. starts[i] (server
-- milliseconds, ascending) is when counts[i] deliveries were claimed by one
-- claim. A claim reads the latest version under its group's lock, counts the
-- starts inside the window, and writes a new version holding only those and
-- its own: the row never grows beyond one entry per claim in the window, and
-- merges drop the older versions.
CREATE TABLE IF NOT EXISTS __DB__.claim_starts (
  topic String,
  grp String,
  starts Array(UInt64),
  counts Array(UInt32),
  ver UInt64
) ENGINE = ReplacingMergeTree(ver) ORDER BY (topic, grp)
