-- 1 when the groups table has its `deleted` column (tables made by earlier
-- versions of the store lack it; add-groups-deleted.sql adds it).
SELECT count() AS n FROM system.columns
WHERE database = {db} AND table = 'groups' AND name = 'deleted'
