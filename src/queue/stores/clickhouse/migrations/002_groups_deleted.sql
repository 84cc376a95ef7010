-- Groups can be removed: `deleted` = 1 marks a removed group (existing rows
-- read 0: registered). 18.16 has no ADD COLUMN IF NOT EXISTS, so the
-- migration runner skips this statement when the column is already there
-- (a database made before versions were recorded may have it).
ALTER TABLE __DB__.groups ADD COLUMN deleted UInt8 DEFAULT 0
