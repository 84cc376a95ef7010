-- deliveries_pending splits in two: unkeyed pending rows (deliveries_pending)
-- and keyed ones (deliveries_pending_keyed), each in claim order. A keyed
-- pending row behind its lane's head cannot be claimed, yet a claim walking
-- the old index (every pending row) stepped over each of them and probed its
-- lane: with a backlog published key by key (1,000 keys × 50 here) every
-- claim walked most of the backlog, about 0.2 s per claim. Claims now take
-- unkeyed work off the first index, and keyed work off a bounded prefix of
-- the second or, when that prefix is mostly rows waiting behind their heads,
-- lane by lane through deliveries_lane (claim.sql). Rows stay as they are.
DROP INDEX __SCHEMA__.deliveries_pending;
CREATE INDEX deliveries_pending ON __SCHEMA__.deliveries (topic, grp, priority DESC, message_seq) WHERE state = 0 /* pending */ AND msg_key IS NULL;
CREATE INDEX deliveries_pending_keyed ON __SCHEMA__.deliveries (topic, grp, priority DESC, message_seq) WHERE state = 0 /* pending */ AND msg_key IS NOT NULL;
