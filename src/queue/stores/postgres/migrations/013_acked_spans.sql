-- When acks finished is kept per run of seqs, not per delivery. The janitor
-- keeps an acked message `ackedRetentionHours` after its last delivery
-- finished; `acks` held one row per ack for that (a narrow row and an entry
-- in its index each, about a sixth of an ack of 100). `acked_spans` holds
-- one row per run of seqs an ack statement finished: the statement's seqs
-- in order, a new run wherever the next is more than 1,000 further on. A
-- message is kept while a span less than the retention old covers its seq.
--
-- A span can cover messages its statement did not ack (the gaps in a run,
-- up to 1,000 seqs each): those are kept until that span too is older than
-- the retention. So a message is kept at least as long as before, and at
-- most one retention longer when an ack of it is written beside acks of
-- messages up to 1,000 seqs away. Spans past the retention protect nothing
-- and are deleted by the janitor (purge-acked-spans.sql).
CREATE TABLE __SCHEMA__.acked_spans (
  first_seq bigint NOT NULL,
  last_seq bigint NOT NULL,
  finished_at timestamptz NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
-- "Does a span less than the retention old cover this seq": a GiST index on
-- the span as a range (one entry per ack statement, not per delivery).
CREATE INDEX acked_spans_seqs ON __SCHEMA__.acked_spans USING gist (int8range(first_seq, last_seq, '[]'));
-- The janitor's deletion of spent spans, oldest first.
CREATE INDEX acked_spans_finished ON __SCHEMA__.acked_spans (finished_at);

-- Each ack record of an existing schema becomes a span of its one seq.
INSERT INTO __SCHEMA__.acked_spans (first_seq, last_seq, finished_at)
SELECT message_seq, message_seq, finished_at FROM __SCHEMA__.acks;
DROP TABLE __SCHEMA__.acks;
