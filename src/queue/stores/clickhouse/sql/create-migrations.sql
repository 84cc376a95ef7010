-- The schema versions applied to this database, one row per migration
-- (file name in `name`). Opening a store creates it when missing and applies
-- the migrations it has not recorded. Two stores opening at once may both
-- apply one and both record it: a version may have two rows until a merge
-- keeps one, and readers take max(version).
CREATE TABLE IF NOT EXISTS __DB__.migrations (
  version UInt32,
  name String,
  applied_at DateTime DEFAULT now()
) ENGINE = ReplacingMergeTree() ORDER BY version
