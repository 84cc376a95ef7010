/**
 * Brings a schema up to the newest migration. Instances starting together
 * serialise on a transaction-scoped advisory lock keyed by the schema, so
 * exactly one applies each pending migration and the others then find it
 * recorded. Each migration commits together with its row in `migrations`.
 */
import type pg from 'pg';
import { IOError } from '../../../errors.js';
import { migrations } from './sql.js';

/** First key of the two-key advisory lock form: "ferr" in ASCII, so ferry's locks are recognisable in pg_locks. */
export const LOCK_NAMESPACE = 0x66657272;

/** Second key (as text, hashed by the server) of the lock that serialises whatever makes or migrates `schema`: the store's migrations and `PostgresLocker`'s set-up. */
export function schemaLockKey(schema: string): string {
  return `migrate:${schema}`;
}

/** Longest wait for the migration lock or one migration, ms: an hour, where the store's own statements get seconds. */
const MIGRATION_TIMEOUT_MS = 3_600_000;

/**
 * Applies every pending migration to `schema` (those up to version `upTo`
 * only, when given: tests build a schema as an earlier ferry left it);
 * resolves with the version the schema is at.
 * @throws IOError the schema is at a version newer than this build knows (a newer ferry migrated it).
 */
export async function migrate(pool: pg.Pool, schema: string, quotedSchema: string, upTo = Number.POSITIVE_INFINITY): Promise<number> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    // A migration may rebuild an index of a large table: it runs without the
    // store's statement timeout (the client-side one is per query below).
    await client.query('SET LOCAL statement_timeout = 0');
    await client.query({ text: 'SELECT pg_advisory_xact_lock($1, hashtext($2))', values: [LOCK_NAMESPACE, schemaLockKey(schema)], query_timeout: MIGRATION_TIMEOUT_MS } as pg.QueryConfig);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${quotedSchema}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${quotedSchema}.migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`,
    );
    const res = await client.query<{ v: number | null }>(`SELECT max(version) AS v FROM ${quotedSchema}.migrations`);
    let at = res.rows[0]?.v ?? 0;
    const known = migrations(quotedSchema);
    const newest = known[known.length - 1]!.version;
    // A newer ferry's schema: this build's statements may no longer fit it.
    if (at > newest) throw new IOError(`schema ${schema} is at version ${at}, newer than this ferry's (${newest}); upgrade ferry to open it`, { transient: false });
    for (const m of known) {
      if (m.version <= at) continue;
      if (m.version > upTo) break;
      await client.query({ text: m.sql, query_timeout: MIGRATION_TIMEOUT_MS } as pg.QueryConfig);
      await client.query(`INSERT INTO ${quotedSchema}.migrations (version, name) VALUES ($1, $2)`, [m.version, m.name]);
      at = m.version;
    }
    await client.query('COMMIT');
    return at;
  } catch (err) {
    await client.query('ROLLBACK').catch((e: Error) => (broken = e));
    throw err;
  } finally {
    client.release(broken);
  }
}
