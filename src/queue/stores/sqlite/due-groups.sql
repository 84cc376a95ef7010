-- Every registered group that has work a claim would take at @now (due as in
-- due-pairs.sql): the poll query for many pairs. Walking the groups table
-- costs less than decoding thousands of pairs from JSON (about a third, at
-- 10,000 groups); the caller keeps the pairs it asked about. Paused groups
-- are left out.
SELECT p.topic AS topic, p.grp AS "group" FROM ferry_groups p
WHERE p.paused = 0 AND (__DUE_DELIVERY__
  OR EXISTS (SELECT 1 FROM ferry_messages m WHERE m.topic = p.topic AND m.seq > p.cursor_seq AND m.due_at <= @now))
