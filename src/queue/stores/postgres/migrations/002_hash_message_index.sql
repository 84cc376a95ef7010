-- deliveries_message serves only equality lookups by message (the messages'
-- ON DELETE CASCADE, the janitor's "every delivery finished?" test, the
-- stats join). As a btree it also yielded deliveries in publish order, and
-- the planner chose it for claims over deliveries_live: it then stepped over
-- every finished row at the head of the table on each claim (33,000 buffers
-- and 35 ms per claim of 128 after 50,000 acks of a million-row backlog,
-- against 900 buffers and 4 ms through deliveries_live). A hash index keeps
-- the lookups and offers no order, so claims read live rows only.
DROP INDEX __SCHEMA__.deliveries_message;
CREATE INDEX deliveries_message ON __SCHEMA__.deliveries USING hash (message_seq);
