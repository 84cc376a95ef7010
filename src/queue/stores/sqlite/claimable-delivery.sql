-- A condition, not a statement: live delivery row d may be claimed at @now.
-- Claimable: pending and past its available_at, or leased with its lease run
-- out (a recovered delivery), and not blocked: a keyed one only at the head of
-- its lane, no earlier live delivery of its key (make-delivery.sql,
-- unblock-lane.sql). With d.state < 2 in the statement, `d.blocked = 0` lets
-- the walk read ferry_deliveries_heads, which holds no blocked row, so a deep
-- lane costs a claim one row, not one probe per row behind its head. The two
-- claim walks (claimable.sql, claimable-by-priority.sql) hold it in place of
-- __CLAIMABLE_DELIVERY__ (sql.ts).
d.blocked = 0
  AND ((d.state = 0 /* pending */ AND d.available_at <= @now) OR (d.state = 1 /* leased */ AND d.lease_until <= @now))
