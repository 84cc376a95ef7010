/**
 * Holding one Postgres statement at a chosen row, so that a test, not
 * timing, decides the order in which two transactions take their locks. A
 * test-only row trigger makes the statement wait on an advisory lock that
 * the test holds from a connection of its own; `pg_blocking_pids` shows
 * who waits for whom (pg_stat_activity cuts statement text at 1 KiB, so it
 * cannot tell the statements apart).
 */
import pg from 'pg';
import { waitFor } from './helpers.js';
import { POSTGRES_DIRECT_URL, adminPool } from './postgres-env.js';

/** The backends waiting for a lock that backend `pid` holds. */
export async function blockedBy(pid: number): Promise<number[]> {
  const rows = await adminPool.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))`, [pid]);
  return rows.rows.map((r) => r.pid);
}

/** Resolves with the one backend waiting for backend `pid`, once there is one (a hang fails the test after `HANG_MS`). */
export async function waiterOf(pid: number, what: string): Promise<number> {
  let waiters: number[] = [];
  await waitFor(async () => (waiters = await blockedBy(pid)).length > 0, 0, what);
  if (waiters.length !== 1) throw new Error(`expected one backend waiting for ${pid} (${what}), found ${waiters.join(', ')}`);
  return waiters[0]!;
}

/** One hold in the quoted schema `s` (its table `table`); `end` it on every path. */
export class StatementHold {
  readonly #s: string;
  readonly #key: string;
  #client: pg.Client | undefined;
  /** The backend holding the advisory lock: a held statement waits for it. */
  pid = 0;

  constructor(quotedSchema: string) {
    this.#s = quotedSchema;
    this.#key = `ferry-test-hold:${quotedSchema}`;
  }

  /**
   * From now on, a statement that fires `event` (e.g. `AFTER INSERT`, `BEFORE
   * DELETE`) on `table` for a row matching `when` (SQL over NEW or OLD)
   * waits there until `release`. A BEFORE DELETE trigger runs once the row
   * is locked, so the statement waits holding it.
   */
  async on(table: string, event: string, when: string): Promise<void> {
    await adminPool.query(`CREATE FUNCTION ${this.#s}.test_hold() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_advisory_xact_lock_shared(hashtext('${this.#key}'));
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
      END $$`);
    await adminPool.query(`CREATE TRIGGER test_hold ${event} ON ${this.#s}.${table} FOR EACH ROW WHEN (${when}) EXECUTE FUNCTION ${this.#s}.test_hold()`);
    this.#client = new pg.Client({ connectionString: POSTGRES_DIRECT_URL });
    await this.#client.connect();
    this.pid = (await this.#client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    await this.#client.query('SELECT pg_advisory_lock(hashtext($1))', [this.#key]);
  }

  /** Lets every held statement go on. */
  async release(): Promise<void> {
    await this.#client?.query('SELECT pg_advisory_unlock(hashtext($1))', [this.#key]);
  }

  async end(): Promise<void> {
    await this.#client?.end().catch(() => undefined);
    this.#client = undefined;
  }
}
