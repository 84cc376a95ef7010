-- The pairs of @pairs, a JSON array of [topic, group], that have work a claim
-- would take at @now: the poll query for few pairs (due-pairs.ts). Each pair
-- is looked up through the indexes a claim uses, so the cost grows with the
-- pairs, never with the rows of idle groups. A paused group, or one not
-- registered, is left out: its claim takes nothing.
--
-- Due: a delivery row a claim would take (due-delivery.sql), or a message
-- past the group's cursor (no delivery row yet) whose due_at has come. A
-- message past the cursor is reported even when its key lane is blocked: the
-- claim that follows makes its delivery row, and from then on the lane test
-- applies.
WITH p AS MATERIALIZED (SELECT value ->> 0 AS topic, value ->> 1 AS grp FROM json_each(@pairs))
SELECT p.topic AS topic, p.grp AS "group" FROM p
WHERE EXISTS (SELECT 1 FROM ferry_groups r WHERE r.topic = p.topic AND r.grp = p.grp AND r.paused = 0)
  AND (__DUE_DELIVERY__
  OR EXISTS (
    SELECT 1 FROM ferry_groups g JOIN ferry_messages m ON m.topic = g.topic AND m.seq > g.cursor_seq
    WHERE g.topic = p.topic AND g.grp = p.grp AND m.due_at <= @now))
