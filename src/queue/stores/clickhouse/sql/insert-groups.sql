-- Group registration versions (deleted 1: removed; paused 1: paused); rows
-- follow as VALUES tuples.
INSERT INTO __DB__.groups (topic, grp, created_at, deleted, paused, ver) VALUES
