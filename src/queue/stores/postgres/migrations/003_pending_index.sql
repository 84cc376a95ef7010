-- Claims walk pending rows only. deliveries_live held every live row
-- (state < 2), so each claim wrote a second entry for every row it leased
-- (the leased version is live too), and a key lane's head test could be
-- planned on it instead of deliveries_lane, filtering the group's whole
-- backlog by key for every row. deliveries_pending holds state 0 alone: a
-- claim's new version leaves it, and leased rows whose lease expired are
-- found through deliveries_leased.
CREATE INDEX deliveries_pending ON __SCHEMA__.deliveries (topic, grp, message_seq) WHERE state = 0 /* pending */;
DROP INDEX __SCHEMA__.deliveries_live;
