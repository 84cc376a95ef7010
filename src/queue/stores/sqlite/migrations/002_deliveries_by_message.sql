-- Version 2 keys ferry_deliveries by (message_seq, grp), WITHOUT ROWID, in
-- place of a rowid table with delivery_id as its primary key. Delivery IDs
-- are hashes, so that key put every new delivery on a random page of a large
-- index: at 200,000 rows, most of the pages a batch of publishes wrote. Now
-- a publish appends at the end of every index it touches, and writes to a
-- delivery find their row through the message's ID.
--
-- Version 1 is the schema of the first store, which recorded no version
-- (user_version reads 0). The rows are copied into the new table in key
-- order and it takes the old one's name; the old table's indexes go with it
-- (ferry_deliveries_message too: the new key serves lookups by message), and
-- the others are made again.
CREATE TABLE ferry_deliveries_v2 (
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
  PRIMARY KEY (message_seq, grp)
) WITHOUT ROWID;
INSERT INTO ferry_deliveries_v2 (message_seq, grp, delivery_id, topic, msg_key, state, attempt, available_at, lease_until, claim_token, holder, last_error, finished_at)
SELECT message_seq, grp, delivery_id, topic, msg_key, state, attempt, available_at, lease_until, claim_token, holder, last_error, finished_at
FROM ferry_deliveries ORDER BY message_seq, grp;
DROP TABLE ferry_deliveries;
ALTER TABLE ferry_deliveries_v2 RENAME TO ferry_deliveries;

-- Claims: live work only, in publish order.
CREATE INDEX IF NOT EXISTS ferry_deliveries_live ON ferry_deliveries (topic, grp, message_seq) WHERE state < 2 /* acked */;
-- The head-of-lane test of keyed deliveries.
CREATE INDEX IF NOT EXISTS ferry_deliveries_lane ON ferry_deliveries (topic, grp, msg_key, message_seq) WHERE state < 2 /* acked */ AND msg_key IS NOT NULL;
-- Dead rows: counted per group, purged by age.
CREATE INDEX IF NOT EXISTS ferry_deliveries_dead ON ferry_deliveries (topic, grp, finished_at) WHERE state = 3 /* dead */;
CREATE INDEX IF NOT EXISTS ferry_deliveries_dead_age ON ferry_deliveries (finished_at) WHERE state = 3 /* dead */;
