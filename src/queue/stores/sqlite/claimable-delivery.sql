-- A condition, not a statement: live delivery row d may be claimed at @now.
-- Claimable: pending and past its available_at, or leased with its lease run
-- out (a recovered delivery). A keyed one only at the head of its lane: no
-- earlier live delivery has its key (every earlier message of the lane has a
-- row by then: see claim.ts). The two claim walks (claimable.sql,
-- claimable-by-priority.sql) hold it in place of __CLAIMABLE_DELIVERY__
-- (sql.ts).
((d.state = 0 /* pending */ AND d.available_at <= @now) OR (d.state = 1 /* leased */ AND d.lease_until <= @now))
  AND (d.msg_key IS NULL OR NOT EXISTS (
    SELECT 1 FROM ferry_deliveries e
    WHERE e.topic = d.topic AND e.grp = d.grp AND e.msg_key = d.msg_key AND e.state < 2 /* acked */ AND e.message_seq < d.message_seq))
