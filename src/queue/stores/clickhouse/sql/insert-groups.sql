-- Group registration versions (deleted 1: removed); rows follow as VALUES tuples.
INSERT INTO __DB__.groups (topic, grp, created_at, deleted, ver) VALUES
