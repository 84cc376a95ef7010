-- A group's recent claim starts, a new version; the row follows as a VALUES
-- tuple.
INSERT INTO __DB__.claim_starts (topic, grp, starts, counts, ver) VALUES
