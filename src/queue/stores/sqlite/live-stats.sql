-- The live deliveries of group @grp on topic @topic that have a row, for
-- stats: total, and leased, those under a lease still running at @now (a
-- leased one whose lease ran out counts as pending). Live rows are those of
-- the claim's index (ferry_deliveries_heads) and the blocked ones, which lie
-- in the lane index; a leased row is never blocked.
SELECT
  (SELECT count(*) FROM ferry_deliveries WHERE topic = @topic AND grp = @grp AND state < 2 /* acked */ AND blocked = 0)
  + (SELECT count(*) FROM ferry_deliveries WHERE topic = @topic AND grp = @grp AND state < 2 /* acked */ AND msg_key IS NOT NULL AND blocked = 1) AS total,
  (SELECT count(*) FROM ferry_deliveries WHERE topic = @topic AND grp = @grp AND state = 1 /* leased */ AND lease_until > @now) AS leased
