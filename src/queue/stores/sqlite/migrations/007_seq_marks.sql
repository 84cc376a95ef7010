-- Version 7 drops the index of messages by due time (ferry_messages_due):
-- every publish wrote a page of it, and only the janitor read it. The janitor
-- walks messages in seq order instead (finished-messages.sql), up to a bound
-- kept in ferry_seq_marks: at each purge, the newest seq then stored
-- (record-seq-mark.sql), so a purge need not look at messages stored after
-- its cutoff.
--
-- Existing messages get one mark per minute of publish time: the end of the
-- minute, and the newest seq published by then. Every other row is kept.
DROP INDEX IF EXISTS ferry_messages_due;
CREATE TABLE IF NOT EXISTS ferry_seq_marks (
  at INTEGER PRIMARY KEY,
  seq INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO ferry_seq_marks (at, seq)
SELECT (published_at / 60000 + 1) * 60000, max(seq) FROM ferry_messages GROUP BY published_at / 60000;
