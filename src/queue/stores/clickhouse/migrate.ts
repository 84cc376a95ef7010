/**
 * Brings a ClickHouse database up to the newest migration, as the Postgres
 * store does its schema: the numbered files in `migrations/` that the
 * database's `migrations` table has not recorded are applied in order, and
 * each is recorded once applied.
 *
 * ClickHouse has no advisory lock and no transactions, and the store's
 * distributed locker is optional (a publisher opens without one), so
 * instances opening a database together are not serialised. Instead every
 * migration statement is idempotent: a CREATE says IF NOT EXISTS, and an
 * `ALTER TABLE … ADD COLUMN` (one column per statement; 18.16 has no ADD
 * COLUMN IF NOT EXISTS) is skipped when `system.columns` already lists the
 * column, and its failure ignored when the column is there afterwards (another
 * instance added it first). Two instances may then both apply a migration and
 * both record it; the outcome is the same. It also lets a database made
 * before versions were recorded (no `migrations` table, its tables already
 * there, with or without later columns) go through every migration from the
 * first. A new migration must keep to these forms (test/queue/clickhouse-migration.test.ts
 * checks it).
 */
import type { ClickHouseClient } from '@clickhouse/client';
import { IOError } from '../../../errors.js';
import { SETTINGS } from './connection.js';
import { insertRows, migrations, render } from './sql.js';
import type { StatementName } from './sql.js';

/** `ALTER TABLE <db>.<table> ADD COLUMN <column> …`: the one statement form the runner makes idempotent itself. */
export const ADD_COLUMN = /^ALTER\s+TABLE\s+`[^`]+`\.(\w+)\s+ADD\s+COLUMN\s+(\w+)\s/i;

/**
 * Creates database `db` when missing and applies every pending migration;
 * resolves with the version the database is at.
 * @throws IOError the database is at a version newer than this build knows (a newer ferry migrated it).
 * @throws the driver's error when the server refuses a statement.
 */
export async function migrate(client: ClickHouseClient, sql: Record<StatementName, string>, db: string, quotedDb: string): Promise<number> {
  const command = (query: string) => client.command({ query, clickhouse_settings: SETTINGS });
  const first = async <R>(query: string): Promise<R | undefined> => {
    const rs = await client.query({ query, format: 'JSONEachRow', clickhouse_settings: SETTINGS });
    return (await rs.json<R>())[0];
  };
  await command(sql['create-database']);
  await command(sql['create-migrations']);
  let at = Number((await first<{ v: number | string }>(sql['schema-version']))?.v ?? 0);
  const known = migrations(quotedDb);
  const newest = known[known.length - 1]!.version;
  // A newer ferry's schema: this build's statements may no longer fit it.
  if (at > newest) throw new IOError(`database ${db} is at schema version ${at}, newer than this ferry's (${newest}); upgrade ferry to open it`, { transient: false });
  for (const m of known) {
    if (m.version <= at) continue;
    for (const statement of m.statements) {
      const add = ADD_COLUMN.exec(statement);
      if (!add) {
        await command(statement);
        continue;
      }
      const has = async () => Number((await first<{ n: string }>(render(sql['column-exists'], { db, table: add[1]!, column: add[2]! })))?.n ?? 0) > 0;
      if (await has()) continue;
      try {
        await command(statement);
      } catch (err) {
        if (!(await has())) throw err;
      }
    }
    await command(insertRows(sql['insert-migration'], [[m.version, m.name]]));
    at = m.version;
  }
  return at;
}
