-- The newest migration applied to this database; 0 when none is recorded
-- (a new database, or one made before versions were recorded).
SELECT max(version) AS v FROM __DB__.migrations
