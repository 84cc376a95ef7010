-- Raises ferry_meta.purged_seq to @seq before the janitor deletes the
-- messages up to it, so append.sql never hands out a deleted seq again.
INSERT INTO ferry_meta (name, value) VALUES ('purged_seq', @seq)
ON CONFLICT (name) DO UPDATE SET value = max(value, excluded.value)
