-- The database clock, in integer milliseconds since the epoch: every time the
-- store keeps comes from it. A write transaction reads it once, after taking
-- the write lock, so a lease never starts before the claim could be made.
SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER)
