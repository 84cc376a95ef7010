-- deliveries_pending holds unkeyed pending rows only. A keyed pending row
-- behind its lane's head cannot be claimed, yet a claim walking the old
-- index (every pending row) stepped over each of them and probed its lane:
-- with a backlog published key by key (1,000 keys × 50 here) every claim
-- walked most of the backlog, about 0.2 s per claim. Claims now find keyed
-- work by lane (claim.sql: one index descent per lane through
-- deliveries_lane, which already holds every live keyed row), and the
-- unkeyed rows through this index. Rows stay as they are.
DROP INDEX __SCHEMA__.deliveries_pending;
CREATE INDEX deliveries_pending ON __SCHEMA__.deliveries (topic, grp, priority DESC, message_seq) WHERE state = 0 /* pending */ AND msg_key IS NULL;
