-- How many deliveries of group @grp on topic @topic are leased under a lease
-- still running at @now: what maxInFlight limits. "state < 2" lets SQLite use
-- the partial index of live rows.
SELECT count(*) FROM ferry_deliveries
WHERE topic = @topic AND grp = @grp AND state < 2 /* acked */ AND state = 1 /* leased */ AND lease_until > @now
