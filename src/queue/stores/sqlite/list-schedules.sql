-- Every schedule, by name (BINARY collation: bytewise, as every store sorts
-- them; names are ASCII). Read whole by each instance's scheduler every
-- round: the table holds one row per schedule.
SELECT name, revision, spec, payload, updated_at, last_tick FROM ferry_schedules ORDER BY name
