-- Schedules (Queue.schedule): one row per name and version, like every
-- other table here. spec is the definition as the engine wrote it (JSON
-- text, never looked into here), revision a fingerprint of spec and payload,
-- so scheduling the same options again finds its row unchanged.
-- updated_at (when this revision was stored) and last_tick (the newest tick
-- published; meaningful when ticked = 1) are instants of the engine's clock
-- in milliseconds, kept as given. A deleted schedule gets a version with
-- deleted = 1. Writes run under the schedule's lock (schedules.ts); readers
-- take each name's whole latest row (argMax of a tuple), so a version is
-- never read half. Every instance's scheduler reads the whole table each
-- round: schedules are few.
CREATE TABLE IF NOT EXISTS __DB__.schedules (
  name String,
  revision String,
  spec String,
  payload String,
  updated_at UInt64,
  ticked UInt8,
  last_tick UInt64,
  deleted UInt8,
  ver UInt64
) ENGINE = ReplacingMergeTree(ver) ORDER BY name
