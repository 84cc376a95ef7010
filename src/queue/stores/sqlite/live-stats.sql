-- The live deliveries of group @grp on topic @topic that have a row, for
-- stats: total, and leased, those under a lease still running at @now (a
-- leased one whose lease ran out counts as pending).
SELECT count(*) AS total, coalesce(sum(state = 1 /* leased */ AND lease_until > @now), 0) AS leased
FROM ferry_deliveries WHERE topic = @topic AND grp = @grp AND state < 2 /* acked */
