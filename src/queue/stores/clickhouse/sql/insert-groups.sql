-- A group's registration; rows follow as VALUES tuples.
INSERT INTO __DB__.groups (topic, grp, created_at, ver) VALUES
