-- Stores schedule $1 (revision $2, spec $3, payload $4, stored at $5)
-- unless its row already has revision $2: that row is left as it is, its
-- last_tick included. A row with another revision is replaced whole and its
-- progress cleared. A row back means this call stored it. Two puts of one
-- name at once serialise on the row's conflict check.
INSERT INTO __SCHEMA__.schedules AS s (name, revision, spec, payload, updated_at, last_tick)
VALUES ($1, $2, $3, $4, $5, NULL)
ON CONFLICT (name) DO UPDATE
SET revision = excluded.revision, spec = excluded.spec, payload = excluded.payload, updated_at = excluded.updated_at, last_tick = NULL
WHERE s.revision <> excluded.revision
RETURNING 1
