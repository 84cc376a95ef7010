/**
 * The SQLite store's poll query (`Store.duePairs`): which of the given
 * (topic, group) pairs have a delivery a claim would take now. One statement
 * for every pair, each looked up through the indexes a claim uses, so its
 * cost grows with the number of pairs asked about (a few index probes each),
 * never with the rows of idle groups.
 *
 * Due, as in the claim statement (sqlite.ts): a live delivery, pending past
 * its `available_at` or leased past its `lease_until`, that is the head of
 * its key lane (no earlier live delivery has its key); or a message past the
 * group's cursor (no delivery row yet) whose `due_at` has come. A message past
 * the cursor is reported even when its key lane is blocked: the claim that
 * follows makes its delivery row, and from then on the lane test applies.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { IOError } from '../../errors.js';
import type { ConsumerGroup } from '../types.js';
import { sqliteTransient } from './transient.js';

/** `@pairs`: a JSON array of `[topic, group]`; `@now`: the database clock, ms. */
export const DUE_PAIRS_SQL = `
WITH p AS MATERIALIZED (SELECT value ->> 0 AS topic, value ->> 1 AS grp FROM json_each(@pairs))
SELECT p.topic AS topic, p.grp AS "group" FROM p
WHERE EXISTS (
    SELECT 1 FROM ferry_deliveries d
    WHERE d.topic = p.topic AND d.grp = p.grp AND d.state < 2
      AND ((d.state = 0 AND d.available_at <= @now) OR (d.state = 1 AND d.lease_until <= @now))
      AND (d.msg_key IS NULL OR NOT EXISTS (
        SELECT 1 FROM ferry_deliveries e
        WHERE e.topic = d.topic AND e.grp = d.grp AND e.msg_key = d.msg_key AND e.state < 2 AND e.message_seq < d.message_seq)))
  OR EXISTS (
    SELECT 1 FROM ferry_groups g JOIN ferry_messages m ON m.topic = g.topic AND m.seq > g.cursor_seq
    WHERE g.topic = p.topic AND g.grp = p.grp AND m.due_at <= @now)`;

/** The prepared poll query of one connection. */
export class SqliteDuePairs {
  readonly #stmt: BetterSqlite3.Statement;
  readonly #now: BetterSqlite3.Statement;

  constructor(db: BetterSqlite3.Database) {
    this.#stmt = db.prepare(DUE_PAIRS_SQL);
    this.#now = db.prepare("SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER)").pluck();
  }

  /**
   * Runs the query (a read: in WAL mode it waits for no writer).
   * @throws IOError (transient when the database was busy) for a SQLite error.
   */
  run(pairs: readonly ConsumerGroup[]): ConsumerGroup[] {
    if (pairs.length === 0) return [];
    try {
      const now = this.#now.get() as number;
      return this.#stmt.all({ pairs: JSON.stringify(pairs.map((p) => [p.topic, p.group])), now }) as ConsumerGroup[];
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (typeof code !== 'string' || !code.startsWith('SQLITE_')) throw err;
      throw new IOError(`sqlite store: ${(err as Error).message} (${code})`, { cause: err, transient: sqliteTransient(err) });
    }
  }
}
