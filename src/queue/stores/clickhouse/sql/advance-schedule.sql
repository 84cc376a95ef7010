-- Records tick {tick} as schedule {name}'s newest: a version {ver} copying
-- the latest one with ticked = 1 and last_tick = {tick}. The caller checked
-- under the schedule's lock that the latest version has the revision it
-- advances and is behind {tick}, and that {ver} is above it. Runs in the
-- server; the payload never travels.
INSERT INTO __DB__.schedules (name, revision, spec, payload, updated_at, ticked, last_tick, deleted, ver)
SELECT name, tupleElement(l, 1), tupleElement(l, 2), tupleElement(l, 3), tupleElement(l, 4), 1, {tick}, 0, {ver}
FROM (
  SELECT name, argMax(tuple(revision, spec, payload, updated_at), ver) AS l
  FROM __DB__.schedules
  WHERE name = {name}
  GROUP BY name
)
