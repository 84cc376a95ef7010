/**
 * The SQLite store's poll query (`Store.duePairs`): which of the given
 * (topic, group) pairs have a delivery a claim would take now. One statement
 * for every pair, each looked up through the indexes a claim uses, so its
 * cost grows with the number of pairs (a few index probes each), never with
 * the rows of idle groups. Few pairs are passed in as JSON (due-pairs.sql);
 * many are found by walking the groups table (due-groups.sql: every
 * registered group, then filtered). Due is as in the claim (claimable.sql).
 */
import type BetterSqlite3 from 'better-sqlite3';
import { IOError } from '../../../errors.js';
import type { ConsumerGroup } from '../../types.js';
import { sqliteTransient } from '../transient.js';
import { prepare } from './sql.js';

/** Past this many pairs a poll walks every group (due-groups.sql) rather than the pairs given. */
export const MANY_PAIRS = 256;

/** The prepared poll query of one connection. */
export class SqliteDuePairs {
  readonly #pairs: BetterSqlite3.Statement;
  readonly #groups: BetterSqlite3.Statement;
  readonly #now: BetterSqlite3.Statement;

  constructor(db: BetterSqlite3.Database) {
    this.#pairs = prepare(db, 'duePairs');
    this.#groups = prepare(db, 'dueGroups');
    this.#now = prepare(db, 'now');
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
