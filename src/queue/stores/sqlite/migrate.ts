/**
 * The SQLite store's tables, and the migration of a database made by an
 * earlier version. `PRAGMA user_version` holds the schema version; a
 * database from before versions were recorded reads 0 and is version 1.
 *
 * Version 2 keys `ferry_deliveries` by (message_seq, grp), WITHOUT ROWID, in
 * place of a rowid table with `delivery_id` as its primary key. Delivery IDs
 * are hashes, so that key put every new delivery on a random page of a large
 * index: at 200,000 rows, most of the pages a batch of publishes wrote. Now
 * a publish appends at the end of every index it touches, and writes to a
 * delivery find their row through the message's ID.
 *
 * Version 3 makes deliveries lazily. `ferry_groups.cursor_seq` is the highest
 * message `seq` the group has a delivery row for (or chose to skip, for a
 * group that starts from the latest message); a publish writes only its
 * `ferry_messages` row, and a claim first turns the messages past its
 * group's cursor into pending deliveries, in `seq` order. A publish no longer
 * costs a row and two index entries per group, and a group that starts from
 * the earliest message no longer copies the topic's backlog when created.
 * The migration sets every cursor to the newest stored message, as version 2
 * made every delivery at publish.
 *
 * Version 4 drops AUTOINCREMENT from `ferry_messages.seq`: keeping its
 * high-water mark in `sqlite_sequence` cost every publish's commit one more
 * dirty page (of six). A publish now numbers its message itself, one past
 * the larger of the newest stored `seq` and `ferry_meta.purged_seq`, the
 * highest `seq` the janitor ever deleted; so a `seq` is never reused, even
 * after the newest messages were purged (a group cursor past a reused `seq`
 * would skip that message). The migration copies the messages into a table
 * without AUTOINCREMENT and takes `purged_seq` from `sqlite_sequence`.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { IOError } from '../../../errors.js';

/** The version this code creates and reads. */
export const SCHEMA_VERSION = 4;

const GROUPS = `
CREATE TABLE IF NOT EXISTS ferry_groups (
  topic TEXT NOT NULL,
  grp TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  cursor_seq INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (topic, grp)
) WITHOUT ROWID;`;

/** The messages table under `name` (the migration builds it beside the old one). */
const messagesTable = (name: string) => `
CREATE TABLE IF NOT EXISTS ${name} (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  topic TEXT NOT NULL,
  msg_key TEXT,
  payload BLOB NOT NULL,
  headers TEXT,
  published_at INTEGER NOT NULL,
  deliver_at INTEGER,
  due_at INTEGER NOT NULL
);`;

const MESSAGE_INDEXES = `
-- A claim's walk past its group's cursor.
CREATE INDEX IF NOT EXISTS ferry_messages_topic ON ferry_messages (topic, seq);
-- The janitor's oldest-first walk.
CREATE INDEX IF NOT EXISTS ferry_messages_due ON ferry_messages (due_at);`;

/** Counters kept across rows: `purged_seq`, the highest message `seq` ever deleted. */
const META = `
CREATE TABLE IF NOT EXISTS ferry_meta (
  name TEXT PRIMARY KEY,
  value INTEGER NOT NULL
) WITHOUT ROWID;`;

const MESSAGE_COLUMNS = 'seq, id, topic, msg_key, payload, headers, published_at, deliver_at, due_at';

/** The deliveries table under `name` (the migration builds it beside the old one). */
const deliveriesTable = (name: string) => `
CREATE TABLE ${name} (
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
) WITHOUT ROWID;`;

const DELIVERY_INDEXES = `
-- Claims: live work only, in publish order.
CREATE INDEX IF NOT EXISTS ferry_deliveries_live ON ferry_deliveries (topic, grp, message_seq) WHERE state < 2;
-- The head-of-lane test of keyed deliveries.
CREATE INDEX IF NOT EXISTS ferry_deliveries_lane ON ferry_deliveries (topic, grp, msg_key, message_seq) WHERE state < 2 AND msg_key IS NOT NULL;
-- Dead rows: counted per group, purged by age.
CREATE INDEX IF NOT EXISTS ferry_deliveries_dead ON ferry_deliveries (topic, grp, finished_at) WHERE state = 3;
CREATE INDEX IF NOT EXISTS ferry_deliveries_dead_age ON ferry_deliveries (finished_at) WHERE state = 3;`;

const JANITOR = `
CREATE TABLE IF NOT EXISTS ferry_janitor (
  name TEXT PRIMARY KEY,
  holder TEXT NOT NULL,
  until INTEGER NOT NULL
) WITHOUT ROWID;`;

const DELIVERY_COLUMNS = 'message_seq, grp, delivery_id, topic, msg_key, state, attempt, available_at, lease_until, claim_token, holder, last_error, finished_at';

/** Version 1 to 2: copies the deliveries into the new table and swaps it in. */
const V1_TO_V2 = `
${deliveriesTable('ferry_deliveries_v2')}
INSERT INTO ferry_deliveries_v2 (${DELIVERY_COLUMNS}) SELECT ${DELIVERY_COLUMNS} FROM ferry_deliveries ORDER BY message_seq, grp;
DROP TABLE ferry_deliveries;
ALTER TABLE ferry_deliveries_v2 RENAME TO ferry_deliveries;
${DELIVERY_INDEXES}`;

/**
 * Version 2 to 3: every group already has a delivery for each stored message
 * it should see, so its cursor is the newest message.
 */
const V2_TO_V3 = `
ALTER TABLE ferry_groups ADD COLUMN cursor_seq INTEGER NOT NULL DEFAULT 0;
UPDATE ferry_groups SET cursor_seq = (SELECT coalesce(max(seq), 0) FROM ferry_messages);`;

/**
 * Version 3 to 4: the messages move to a table without AUTOINCREMENT (its
 * indexes go with the old table and are made again); the highest `seq`
 * AUTOINCREMENT handed out becomes `purged_seq`, so no later message reuses
 * the `seq` of one already purged.
 */
const V3_TO_V4 = `
${messagesTable('ferry_messages_v4')}
INSERT INTO ferry_messages_v4 (${MESSAGE_COLUMNS}) SELECT ${MESSAGE_COLUMNS} FROM ferry_messages ORDER BY seq;
INSERT INTO ferry_meta (name, value)
  SELECT 'purged_seq', seq FROM sqlite_sequence WHERE name = 'ferry_messages'
  ON CONFLICT (name) DO UPDATE SET value = max(value, excluded.value);
DROP TABLE ferry_messages;
ALTER TABLE ferry_messages_v4 RENAME TO ferry_messages;
${MESSAGE_INDEXES}`;

/**
 * Creates the tables in an empty database, or brings one made by an earlier
 * version up to `SCHEMA_VERSION`, in one `BEGIN IMMEDIATE` transaction (two
 * processes opening one file at once migrate it once).
 *
 * @throws IOError the database was made by a newer version of ferry.
 */
export function setUpSchema(db: BetterSqlite3.Database): void {
  db.transaction(() => {
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version > SCHEMA_VERSION) {
      throw new IOError(`database schema version ${version} is newer than this ferry's (${SCHEMA_VERSION}); upgrade ferry to open it`);
    }
    if (version === SCHEMA_VERSION) return;
    const hasDeliveries = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ferry_deliveries'`).get() !== undefined;
    // Those missing, at the current version (an old messages table stays as it is until migrated).
    db.exec(GROUPS + messagesTable('ferry_messages') + MESSAGE_INDEXES + META + JANITOR);
    if (!hasDeliveries) {
      db.exec(deliveriesTable('ferry_deliveries') + DELIVERY_INDEXES);
    } else {
      if (version < 2) db.exec(V1_TO_V2);
      if (version < 3) db.exec(V2_TO_V3);
      if (version < 4) db.exec(V3_TO_V4);
    }
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
  }).immediate();
}
