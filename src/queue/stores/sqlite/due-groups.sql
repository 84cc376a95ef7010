-- Every registered group that has work a claim would take at @now (due as in
-- due-pairs.sql): the poll query for many pairs. Walking the groups table
-- costs less than decoding thousands of pairs from JSON (about a third, at
-- 10,000 groups); the caller keeps the pairs it asked about.
SELECT p.topic AS topic, p.grp AS "group" FROM ferry_groups p
WHERE EXISTS (
    SELECT 1 FROM ferry_deliveries d
    WHERE d.topic = p.topic AND d.grp = p.grp AND d.state < 2 /* acked */
      AND ((d.state = 0 /* pending */ AND d.available_at <= @now) OR (d.state = 1 /* leased */ AND d.lease_until <= @now))
      AND (d.msg_key IS NULL OR NOT EXISTS (
        SELECT 1 FROM ferry_deliveries e
        WHERE e.topic = d.topic AND e.grp = d.grp AND e.msg_key = d.msg_key AND e.state < 2 /* acked */ AND e.message_seq < d.message_seq)))
  OR EXISTS (SELECT 1 FROM ferry_messages m WHERE m.topic = p.topic AND m.seq > p.cursor_seq AND m.due_at <= @now)
