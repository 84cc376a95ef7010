-- Deletes schedule $1; a row back means it existed.
DELETE FROM __SCHEMA__.schedules WHERE name = $1
RETURNING 1
