-- Message versions; rows follow as VALUES tuples.
INSERT INTO __DB__.messages (topic, id, seq, msg_key, payload, headers, published_at, deliver_at, due_at, deleted, ver) VALUES
