-- Records, at the start of a purge at @now, the newest seq stored then
-- (0: none): every message with a larger seq is stored after @now, so its
-- deliveries are acked after @now too (finished-messages.sql). A seq is never
-- reused (append.sql).
INSERT INTO ferry_seq_marks (at, seq) VALUES (@now, (SELECT coalesce(max(seq), 0) FROM ferry_messages))
ON CONFLICT (at) DO UPDATE SET seq = max(seq, excluded.seq)
