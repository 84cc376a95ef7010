-- The latest version of schedule {name}, read under its lock before a write:
-- its revision, whether a tick was recorded and which, whether it was
-- deleted, and its version (a write goes above it). No row when the name
-- was never stored.
SELECT tupleElement(l, 1) AS l_revision, tupleElement(l, 2) AS l_ticked, tupleElement(l, 3) AS l_last_tick,
       tupleElement(l, 4) AS l_deleted, l_ver
FROM (
  SELECT argMax(tuple(revision, ticked, last_tick, deleted), ver) AS l, max(ver) AS l_ver
  FROM __DB__.schedules
  WHERE name = {name}
  GROUP BY name
)
