-- Version 4 drops AUTOINCREMENT from ferry_messages.seq: keeping its
-- high-water mark in sqlite_sequence cost every publish's commit one more
-- dirty page (of six). A publish now numbers its message itself (append.sql),
-- one past the larger of the newest stored seq and ferry_meta.purged_seq,
-- the highest seq the janitor ever deleted; so a seq is never reused, even
-- after the newest messages were purged (a group cursor past a reused seq
-- would skip that message).
--
-- The messages move to a table without AUTOINCREMENT (the old table's
-- indexes go with it and are made again); the highest seq AUTOINCREMENT
-- handed out becomes purged_seq, so no later message reuses the seq of one
-- already purged.
CREATE TABLE IF NOT EXISTS ferry_meta (
  name TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ferry_messages_v4 (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  topic TEXT NOT NULL,
  msg_key TEXT,
  payload BLOB NOT NULL,
  headers TEXT,
  published_at INTEGER NOT NULL,
  deliver_at INTEGER,
  due_at INTEGER NOT NULL
);
INSERT INTO ferry_messages_v4 (seq, id, topic, msg_key, payload, headers, published_at, deliver_at, due_at)
SELECT seq, id, topic, msg_key, payload, headers, published_at, deliver_at, due_at FROM ferry_messages ORDER BY seq;
INSERT INTO ferry_meta (name, value)
  SELECT 'purged_seq', seq FROM sqlite_sequence WHERE name = 'ferry_messages'
  ON CONFLICT (name) DO UPDATE SET value = max(value, excluded.value);
DROP TABLE ferry_messages;
ALTER TABLE ferry_messages_v4 RENAME TO ferry_messages;

-- A claim's walk past its group's cursor.
CREATE INDEX IF NOT EXISTS ferry_messages_topic ON ferry_messages (topic, seq);
-- The janitor's oldest-first walk.
CREATE INDEX IF NOT EXISTS ferry_messages_due ON ferry_messages (due_at);
