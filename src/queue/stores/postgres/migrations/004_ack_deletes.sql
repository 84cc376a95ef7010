-- An ack deletes its delivery row. Updating it to state 2 wrote a whole new
-- version of the row and a new entry in its primary key and message index,
-- and left both versions for vacuum; a delete only marks the row. What the
-- janitor still needs of an acked delivery, when it finished (acked
-- messages are kept `ackedRetentionHours` after every group finished them),
-- goes to `acks`: a narrow row and one index entry per ack. Rows leave with
-- their message (purge-messages deletes both).
CREATE TABLE __SCHEMA__.acks (
  message_seq bigint NOT NULL,
  finished_at timestamptz NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
CREATE INDEX acks_message ON __SCHEMA__.acks (message_seq);

-- The acked rows of an existing schema move over.
INSERT INTO __SCHEMA__.acks (message_seq, finished_at)
SELECT message_seq, finished_at FROM __SCHEMA__.deliveries WHERE state = 2 /* acked */;
DELETE FROM __SCHEMA__.deliveries WHERE state = 2 /* acked */;
