-- Version 5 keeps schedules (Queue.schedule): one row per name, as the
-- Postgres store does. spec is the definition as the engine wrote it (JSON
-- text, never looked into here), revision a fingerprint of spec and payload,
-- so scheduling the same options again finds its row unchanged. updated_at
-- (when this revision was stored) and last_tick (the newest tick published)
-- are integer milliseconds of the engine's clock, kept as given, not the
-- database's. Every instance's scheduler reads the whole table each round:
-- schedules are few. Nothing older changes.
CREATE TABLE IF NOT EXISTS ferry_schedules (
  name TEXT PRIMARY KEY,
  revision TEXT NOT NULL,
  spec TEXT NOT NULL,
  payload BLOB NOT NULL,
  updated_at INTEGER NOT NULL,
  last_tick INTEGER
) WITHOUT ROWID;
