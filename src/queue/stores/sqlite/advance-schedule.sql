-- Records that schedule @name's ticks up to @tick were published: last_tick
-- becomes the later of itself and @tick (never back, so instances finishing
-- in any order agree), only while the row still has revision @revision. One
-- row changed: a row named @name with revision @revision exists (moved or
-- already at or past @tick); none: the schedule was deleted or replaced (the
-- caller then forgets what it knew of it). A scheduler calls this after each
-- round that published ticks.
UPDATE ferry_schedules SET last_tick = max(coalesce(last_tick, @tick), @tick)
WHERE name = @name AND revision = @revision
