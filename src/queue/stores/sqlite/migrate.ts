/**
 * Sets up the SQLite store's tables: creates them in a new database
 * (schema.sql), or brings one made by an earlier version of ferry up to
 * `SCHEMA_VERSION` (migrations/NNN_name.sql, NNN the version each brings a
 * database to; the file says why that version came). `PRAGMA user_version`
 * holds the schema version; a database from before versions were recorded
 * reads 0 and is version 1.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { IOError } from '../../../errors.js';
import { files } from './sql.js';

/** The version this code creates and reads: the newest migration's. */
export const SCHEMA_VERSION = 8;

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
      throw new IOError(`database schema version ${version} is newer than this ferry's (${SCHEMA_VERSION}); upgrade ferry to open it`, { transient: false });
    }
    if (version === SCHEMA_VERSION) return;
    const hasDeliveries = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'ferry_deliveries'`).get() !== undefined;
    if (!hasDeliveries) {
      db.exec(files.read('schema.sql'));
    } else {
      const at = Math.max(version, 1);
      for (const m of files.migrations()) if (m.version > at) db.exec(m.sql);
    }
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
  }).immediate();
}
