-- 1 when table {table} of database {db} has column {column}: the migration
-- runner's test before an ADD COLUMN (18.16 has no ADD COLUMN IF NOT EXISTS).
SELECT count() AS n FROM system.columns
WHERE database = {db} AND table = {table} AND name = {column}
