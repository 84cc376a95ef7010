-- Every schedule, by name (bytewise, as every store sorts them). Read whole
-- by each instance's scheduler every round: the table holds one row per
-- schedule.
SELECT name, revision, spec, payload, updated_at, last_tick
FROM __SCHEMA__.schedules
ORDER BY name COLLATE "C"
