-- Schedules (Queue.schedule): one row per name. spec is the definition as
-- the engine wrote it (JSON text, never looked into here), revision a
-- fingerprint of spec and payload, so scheduling the same options again
-- finds its row unchanged. updated_at (when this revision was stored) and
-- last_tick (the newest tick published) are instants of the engine's
-- clock, kept as given. Every instance's scheduler reads the whole table
-- each round: schedules are few.
CREATE TABLE __SCHEMA__.schedules (
  name text PRIMARY KEY,
  revision text NOT NULL,
  spec text NOT NULL,
  payload bytea NOT NULL,
  updated_at timestamptz NOT NULL,
  last_tick timestamptz
);
