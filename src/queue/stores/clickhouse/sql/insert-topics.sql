-- New next sequence numbers; rows follow as VALUES tuples.
INSERT INTO __DB__.topics (topic, next_seq, ver) VALUES
