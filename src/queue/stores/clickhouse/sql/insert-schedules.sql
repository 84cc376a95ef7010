-- Schedule versions (a new revision, or deleted = 1 for a deletion); rows
-- follow as VALUES tuples.
INSERT INTO __DB__.schedules (name, revision, spec, payload, updated_at, ticked, last_tick, deleted, ver) VALUES
