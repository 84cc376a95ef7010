/**
 * The SQLite store's poll query (`Store.duePairs`): which of the given
 * (topic, group) pairs have a delivery a claim would take now. One statement
 * for every pair, each looked up through the indexes a claim uses, so its
 * cost grows with the number of pairs (a few index probes each), never with
 * the rows of idle groups. Few pairs are passed in as JSON; many are found
 * by walking the groups table (every registered group, then filtered).
 *
 * Due, as in the claim statement (store.ts): a live delivery, pending past
 * its `available_at` or leased past its `lease_until`, that is the head of
 * its key lane (no earlier live delivery has its key); or a message past the
 * group's cursor (no delivery row yet) whose `due_at` has come. A message past
 * the cursor is reported even when its key lane is blocked: the claim that
 * follows makes its delivery row, and from then on the lane test applies.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { IOError } from '../../../errors.js';
import type { ConsumerGroup } from '../../types.js';
import { sqliteTransient } from '../transient.js';

/** A delivery of group `p.grp` on topic `p.topic` a claim would take at `@now` (ms). */
const DUE_DELIVERY = `EXISTS (
    SELECT 1 FROM ferry_deliveries d
    WHERE d.topic = p.topic AND d.grp = p.grp AND d.state < 2
      AND ((d.state = 0 AND d.available_at <= @now) OR (d.state = 1 AND d.lease_until <= @now))
      AND (d.msg_key IS NULL OR NOT EXISTS (
        SELECT 1 FROM ferry_deliveries e
        WHERE e.topic = d.topic AND e.grp = d.grp AND e.msg_key = d.msg_key AND e.state < 2 AND e.message_seq < d.message_seq)))`;

/** The pairs of `@pairs`, a JSON array of `[topic, group]`, with due work: few pairs. */
export const DUE_PAIRS_SQL = `
WITH p AS MATERIALIZED (SELECT value ->> 0 AS topic, value ->> 1 AS grp FROM json_each(@pairs))
SELECT p.topic AS topic, p.grp AS "group" FROM p
WHERE ${DUE_DELIVERY}
  OR EXISTS (
    SELECT 1 FROM ferry_groups g JOIN ferry_messages m ON m.topic = g.topic AND m.seq > g.cursor_seq
    WHERE g.topic = p.topic AND g.grp = p.grp AND m.due_at <= @now)`;

/**
 * Every registered group with due work: many pairs. Walking the groups table
 * costs less than decoding thousands of pairs from JSON (about a third, at
 * 10,000 groups); the caller keeps the pairs it asked about.
 */
export const DUE_GROUPS_SQL = `
SELECT p.topic AS topic, p.grp AS "group" FROM ferry_groups p
WHERE ${DUE_DELIVERY}
  OR EXISTS (SELECT 1 FROM ferry_messages m WHERE m.topic = p.topic AND m.seq > p.cursor_seq AND m.due_at <= @now)`;

/** Past this many pairs a poll walks every group (`DUE_GROUPS_SQL`) rather than the pairs given. */
export const MANY_PAIRS = 256;

/** The prepared poll query of one connection. */
export class SqliteDuePairs {
  readonly #pairs: BetterSqlite3.Statement;
  readonly #groups: BetterSqlite3.Statement;
  readonly #now: BetterSqlite3.Statement;

  constructor(db: BetterSqlite3.Database) {
    this.#pairs = db.prepare(DUE_PAIRS_SQL);
    this.#groups = db.prepare(DUE_GROUPS_SQL);
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
      if (pairs.length <= MANY_PAIRS) {
        return this.#pairs.all({ pairs: JSON.stringify(pairs.map((p) => [p.topic, p.group])), now }) as ConsumerGroup[];
      }
      const due = this.#groups.all({ now }) as ConsumerGroup[];
      if (due.length === 0) return due;
      const asked = new Set(pairs.map((p) => `${p.topic}\u0000${p.group}`));
      return due.filter((d) => asked.has(`${d.topic}\u0000${d.group}`));
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (typeof code !== 'string' || !code.startsWith('SQLITE_')) throw err;
      throw new IOError(`sqlite store: ${(err as Error).message} (${code})`, { cause: err, transient: sqliteTransient(err) });
    }
  }
}
