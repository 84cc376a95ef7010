-- The first version of a ferry queue database: the store's tables as its
-- first release made them. __DB__ is the validated, back-quoted database
-- name. Every statement creates only what is missing, so a database made
-- before versions were recorded (which has these tables already) passes
-- through unchanged. Every table is a ReplacingMergeTree:
-- a change is a new row with a larger `ver`, and readers take each key's
-- row with the largest `ver` (argMax), so merges may drop old versions at any
-- time without changing what is read. Times are UInt64 milliseconds on the
-- server's clock (18.16 has no DateTime64). Statements are separated by a
-- line holding only `;`.

-- The next message sequence number of each topic (publish order), bumped by
-- every append under the topic's lock.
CREATE TABLE IF NOT EXISTS __DB__.topics (
  topic String,
  next_seq UInt64,
  ver UInt64
) ENGINE = ReplacingMergeTree(ver) ORDER BY topic
;
-- Consumer groups. A group's row is written last when it is registered, so a
-- group whose backfill failed half-way is registered again, not half-filled.
-- Migration 2 adds `deleted`.
CREATE TABLE IF NOT EXISTS __DB__.groups (
  topic String,
  grp String,
  created_at UInt64,
  ver UInt64
) ENGINE = ReplacingMergeTree(ver) ORDER BY (topic, grp)
;
-- Messages. A message's row is written after its deliveries, so it is the
-- commit point of an append: a delivery whose message row is missing belongs
-- to an append that has not finished (or failed) and is not handed out.
-- `deleted` = 1 marks a purged message.
CREATE TABLE IF NOT EXISTS __DB__.messages (
  topic String,
  id String,
  seq UInt64,
  msg_key Nullable(String),
  payload String,
  headers Nullable(String),
  published_at UInt64,
  deliver_at Nullable(UInt64),
  due_at UInt64,
  deleted UInt8,
  ver UInt64
) ENGINE = ReplacingMergeTree(ver) ORDER BY (topic, id)
;
-- One row per (message, group) and version. state: 0 pending, 1 leased,
-- 2 acked, 3 dead, 4 purged.
CREATE TABLE IF NOT EXISTS __DB__.deliveries (
  topic String,
  grp String,
  delivery_id String,
  message_id String,
  seq UInt64,
  msg_key Nullable(String),
  state UInt8,
  attempt UInt32,
  available_at UInt64,
  lease_until UInt64,
  claim_token String,
  holder String,
  last_error String,
  finished_at UInt64,
  ver UInt64
) ENGINE = ReplacingMergeTree(ver) ORDER BY (topic, grp, delivery_id)
;
-- The janitor role: who holds it and until when (server clock).
CREATE TABLE IF NOT EXISTS __DB__.janitor (
  name String,
  holder String,
  until UInt64,
  ver UInt64
) ENGINE = ReplacingMergeTree(ver) ORDER BY name
