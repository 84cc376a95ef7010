-- A condition, not a statement: group p.grp on topic p.topic has a delivery
-- row a claim would take at @now (as in claimable.sql): pending past its
-- available_at or leased past its lease_until, at the head of its key lane
-- (not blocked: one range of ferry_deliveries_heads). The two poll queries
-- (due-pairs.sql, due-groups.sql) hold it in place of __DUE_DELIVERY__
-- (sql.ts).
EXISTS (
  SELECT 1 FROM ferry_deliveries d
  WHERE d.topic = p.topic AND d.grp = p.grp AND d.state < 2 /* acked */ AND d.blocked = 0
    AND ((d.state = 0 /* pending */ AND d.available_at <= @now) OR (d.state = 1 /* leased */ AND d.lease_until <= @now)))
