-- Gives a groups table made by an earlier version of the store its `deleted`
-- column (existing rows read 0: registered). 18.16 has no ADD COLUMN IF NOT
-- EXISTS, so the store checks first (groups-deleted-column.sql).
ALTER TABLE __DB__.groups ADD COLUMN deleted UInt8 DEFAULT 0
