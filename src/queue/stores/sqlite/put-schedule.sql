-- Stores schedule @name (revision @revision, spec @spec, payload @payload,
-- stored at @updatedAt) unless its row already has revision @revision: that
-- row is left as it is, its last_tick included. A row with another revision
-- is replaced whole and its progress cleared. One row changed: this call
-- stored it. Two puts of one name at once serialise on the write lock.
INSERT INTO ferry_schedules (name, revision, spec, payload, updated_at, last_tick)
VALUES (@name, @revision, @spec, @payload, @updatedAt, NULL)
ON CONFLICT (name) DO UPDATE
SET revision = excluded.revision, spec = excluded.spec, payload = excluded.payload, updated_at = excluded.updated_at, last_tick = NULL
WHERE ferry_schedules.revision <> excluded.revision
