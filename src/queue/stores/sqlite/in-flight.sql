-- How many deliveries of group @grp on topic @topic are leased under a lease
-- still running at @now: what maxInFlight limits. One range of the partial
-- index of leased rows, however many pending ones the group has.
SELECT count(*) FROM ferry_deliveries
WHERE topic = @topic AND grp = @grp AND state = 1 /* leased */ AND lease_until > @now
