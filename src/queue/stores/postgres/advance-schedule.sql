-- Records that schedule $1's ticks up to $3 were published: moves last_tick
-- to $3 when the row still has revision $2 and is behind (never back, so
-- instances finishing in any order agree). held is true when a row named $1
-- with revision $2 exists, whether it moved or was already at or past $3;
-- false when the schedule was deleted or replaced (the caller then forgets
-- what it knew of it). A scheduler calls this after each round that
-- published ticks.
WITH moved AS (
  UPDATE __SCHEMA__.schedules SET last_tick = $3
  WHERE name = $1 AND revision = $2 AND (last_tick IS NULL OR last_tick < $3)
  RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM moved) OR EXISTS (SELECT 1 FROM __SCHEMA__.schedules WHERE name = $1 AND revision = $2) AS held
