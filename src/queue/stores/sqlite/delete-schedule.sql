-- Deletes schedule @name; one row changed means it existed.
DELETE FROM ferry_schedules WHERE name = @name
