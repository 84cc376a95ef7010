-- The SQLite store's tables at the newest schema version (migrate.ts'
-- SCHEMA_VERSION), made in one step in a new database. A database made by an
-- earlier version is brought here by migrations/ instead; a test checks that
-- both end with the same tables and indexes. Times are integer milliseconds
-- since the epoch on the database's clock (now.sql).

-- Consumer groups. cursor_seq is the highest message seq the group has a
-- delivery row for, or chose to skip (a group that starts from the latest
-- message): a claim makes the deliveries of the messages past it. paused is 1
-- while the group is paused (set-group-paused.sql).
CREATE TABLE IF NOT EXISTS ferry_groups (
  topic TEXT NOT NULL,
  grp TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  cursor_seq INTEGER NOT NULL DEFAULT 0,
  paused INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (topic, grp)
) WITHOUT ROWID;

-- Messages; seq is publish order, numbered by append.sql (never reused).
-- due_at is deliver_at when scheduled, else published_at. priority is
-- Message.priority (0 when none was given).
CREATE TABLE IF NOT EXISTS ferry_messages (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  topic TEXT NOT NULL,
  msg_key TEXT,
  payload BLOB NOT NULL,
  headers TEXT,
  published_at INTEGER NOT NULL,
  deliver_at INTEGER,
  due_at INTEGER NOT NULL,
  priority INTEGER NOT NULL DEFAULT 0
);
-- A claim's walk past its group's cursor. (No index by due_at: a publish
-- writes a page of every index, and the janitor walks by seq; migrations/007.)
CREATE INDEX IF NOT EXISTS ferry_messages_topic ON ferry_messages (topic, seq);
-- The newest message above priority 0 of a topic: a claim makes the
-- deliveries up to it before it chooses (newest-raised-seq.sql).
CREATE INDEX IF NOT EXISTS ferry_messages_raised ON ferry_messages (topic, seq) WHERE priority > 0;

-- Counters kept across rows: purged_seq, the highest message seq ever deleted.
CREATE TABLE IF NOT EXISTS ferry_meta (
  name TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;

-- The janitor's marks: at each purge (database clock `at`), the newest seq
-- then stored; a purge walks messages up to the first mark after its cutoff
-- (finished-messages.sql).
CREATE TABLE IF NOT EXISTS ferry_seq_marks (
  at INTEGER PRIMARY KEY,
  seq INTEGER NOT NULL
) WITHOUT ROWID;

-- One row per message and group, made at claim time, keyed by its message's
-- seq so a publish appends at the end of every index it touches. state is a
-- code of src/queue/stores/delivery-state.ts; priority is its message's.
-- blocked is 1 while a live keyed row has an earlier live row of its key (it
-- is not the head of its lane), else 0 (migrations/008).
CREATE TABLE IF NOT EXISTS ferry_deliveries (
  message_seq INTEGER NOT NULL,
  grp TEXT NOT NULL,
  delivery_id TEXT NOT NULL,
  topic TEXT NOT NULL,
  msg_key TEXT,
  state INTEGER NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 0,
  available_at INTEGER NOT NULL,
  lease_until INTEGER,
  claim_token TEXT,
  holder TEXT,
  last_error TEXT,
  finished_at INTEGER,
  priority INTEGER NOT NULL DEFAULT 0,
  blocked INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (message_seq, grp)
) WITHOUT ROWID;
-- Claims: live work at the head of its lane only (every unkeyed row is its
-- own lane), highest priority first, then in publish order.
CREATE INDEX IF NOT EXISTS ferry_deliveries_heads ON ferry_deliveries (topic, grp, priority DESC, message_seq) WHERE state < 2 /* acked */ AND blocked = 0;
-- Leased rows by lease end: maxInFlight's count (in-flight.sql).
CREATE INDEX IF NOT EXISTS ferry_deliveries_leased ON ferry_deliveries (topic, grp, lease_until) WHERE state = 1 /* leased */;
-- Each key lane's live rows in order: whether a new row is blocked, and the
-- next head when one is acked or dead-lettered.
CREATE INDEX IF NOT EXISTS ferry_deliveries_lane ON ferry_deliveries (topic, grp, msg_key, message_seq) WHERE state < 2 /* acked */ AND msg_key IS NOT NULL;
-- Dead rows: counted per group, purged by age.
CREATE INDEX IF NOT EXISTS ferry_deliveries_dead ON ferry_deliveries (topic, grp, finished_at) WHERE state = 3 /* dead */;
CREATE INDEX IF NOT EXISTS ferry_deliveries_dead_age ON ferry_deliveries (finished_at) WHERE state = 3 /* dead */;

-- Schedules (Queue.schedule), one row per name: spec is the engine's JSON,
-- revision a fingerprint of spec and payload; updated_at and last_tick are
-- instants of the engine's clock, kept as given (migrations/005).
CREATE TABLE IF NOT EXISTS ferry_schedules (
  name TEXT PRIMARY KEY,
  revision TEXT NOT NULL,
  spec TEXT NOT NULL,
  payload BLOB NOT NULL,
  updated_at INTEGER NOT NULL,
  last_tick INTEGER
) WITHOUT ROWID;

-- The rate limit's record: how many claims group grp of topic started at
-- each millisecond started_at (database clock), kept for one window.
CREATE TABLE IF NOT EXISTS ferry_claim_starts (
  topic TEXT NOT NULL,
  grp TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  claims INTEGER NOT NULL,
  PRIMARY KEY (topic, grp, started_at)
) WITHOUT ROWID;

-- The janitor lease: one row, held by one store handle at a time (janitor.sql).
CREATE TABLE IF NOT EXISTS ferry_janitor (
  name TEXT PRIMARY KEY,
  holder TEXT NOT NULL,
  until INTEGER NOT NULL
) WITHOUT ROWID;
