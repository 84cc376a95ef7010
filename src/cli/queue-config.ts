/**
 * Opening a `ferry/queue` queue from a `createQueue` config file, for the
 * commands that operate on one (`ferry queue`, `ferry dashboard`).
 *
 * These commands are tools beside the application, never instances of it:
 * the queue they open fires no schedules (`fireSchedules: false`), so running
 * one never publishes a tick, whatever the application's instances do.
 */
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createQueue, type QueueConfig } from '../queue/index.js';
import type { Queue } from '../queue/types.js';
import { DEFAULT_POSTGRES_SCHEMA, poolConfig } from '../queue/stores/postgres/connection.js';
import { quoteSchema } from '../queue/stores/postgres/sql.js';
import { DEFAULT_CLICKHOUSE_DATABASE, quoteDatabase } from '../queue/stores/clickhouse/sql.js';
import { literal } from '../queue/stores/clickhouse/escape.js';
import { CliError, EXIT_USAGE, describe } from './common.js';

/**
 * Reads and parses a config file.
 *
 * @throws CliError (exit 2) the file cannot be read or is not JSON.
 */
export async function readConfig(path: string): Promise<QueueConfig> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read ${path}: ${describe(err)}`, EXIT_USAGE);
  }
  try {
    return JSON.parse(text) as QueueConfig;
  } catch (err) {
    throw new CliError(`${path} is not JSON: ${describe(err)}`, EXIT_USAGE);
  }
}

/** Options of {@link openConfiguredQueue}. */
export interface OpenConfiguredOptions {
  /**
   * Refuse configs that could only show an empty queue: a `memory` queue
   * (private to the process that made it) and a `sqlite` file that does not
   * exist (opening would create an empty database, hiding a mistyped path),
   * and a `postgres` schema or `clickhouse` database that does not exist
   * (opening would create it).
   */
  existing: boolean;
}

/**
 * Builds the queue `path` describes, with `fireSchedules: false`.
 *
 * @throws CliError (exit 2) the file is unreadable or not JSON, the config
 * builds no queue (`enabled: false`), is refused under `existing`, or the
 * queue cannot be opened (bad config, unreachable store).
 */
export async function openConfiguredQueue(path: string, o: OpenConfiguredOptions): Promise<Queue> {
  const config = await readConfig(path);
  if (o.existing) {
    refuseEmpty(path, config);
    await refuseMissingSchema(path, config);
    await refuseMissingDatabase(path, config);
  }
  let queue: Queue | undefined;
  try {
    queue = await createQueue(config, { fireSchedules: false });
  } catch (err) {
    throw new CliError(`cannot open the queue of ${path}: ${describe(err)}`, EXIT_USAGE);
  }
  if (!queue) throw new CliError(`${path} builds no queue: set "enabled": true`, EXIT_USAGE);
  return queue;
}

function refuseEmpty(path: string, config: QueueConfig): void {
  if (typeof config !== 'object' || config === null || config.enabled === false) return; // createQueue says what is wrong
  if (config.type === 'memory') {
    throw new CliError(`${path} is a memory queue: it lives inside the process that made it, so this command would see an empty one`, EXIT_USAGE);
  }
  const file = (config.config as { path?: unknown } | undefined)?.path;
  if (config.type === 'sqlite' && typeof file === 'string' && file !== '' && file !== ':memory:' && !file.startsWith('file:') && !existsSync(file)) {
    throw new CliError(`no queue at ${file} (from ${path}): the SQLite file does not exist`, EXIT_USAGE);
  }
}

/**
 * A `postgres` config whose schema does not exist yet: opening would create
 * and migrate it, and show an empty queue where a mistyped schema name was
 * meant. A database that cannot be reached is left for `createQueue` to
 * report, and so is a schema name the store refuses.
 */
async function refuseMissingSchema(path: string, config: QueueConfig): Promise<void> {
  if (typeof config !== 'object' || config === null || config.enabled === false || config.type !== 'postgres') return;
  const block = config.config as { connectionString?: unknown; schema?: unknown } | undefined;
  if (typeof block?.connectionString !== 'string' || block.connectionString === '') return;
  const schema = typeof block.schema === 'string' ? block.schema : DEFAULT_POSTGRES_SCHEMA;
  try {
    quoteSchema(schema);
  } catch {
    return; // a name the store refuses: createQueue says why, which "does not exist" would hide
  }
  const { default: pg } = await import('pg');
  const client = new pg.Client(poolConfig(pg, block.connectionString, 1));
  let found: boolean;
  try {
    await client.connect();
    found = (await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema])).rowCount === 1;
  } catch {
    return;
  } finally {
    await client.end().catch(() => undefined);
  }
  if (!found) throw new CliError(`no queue in schema ${schema} (from ${path}): the Postgres schema does not exist`, EXIT_USAGE);
}

/**
 * A `clickhouse` config whose database does not exist yet: as for a
 * Postgres schema above, opening would create it and show an empty queue. A
 * server that cannot be reached, or a name the store refuses, is left for
 * `createQueue` to report.
 */
async function refuseMissingDatabase(path: string, config: QueueConfig): Promise<void> {
  if (typeof config !== 'object' || config === null || config.enabled === false || config.type !== 'clickhouse') return;
  const block = config.config as { url?: unknown; username?: unknown; password?: unknown; database?: unknown } | undefined;
  if (typeof block?.url !== 'string' || block.url === '') return;
  const database = typeof block.database === 'string' ? block.database : DEFAULT_CLICKHOUSE_DATABASE;
  let found: boolean;
  try {
    quoteDatabase(database);
    const { createClient, ClickHouseLogLevel } = await import('@clickhouse/client');
    const client = createClient({
      url: block.url,
      username: typeof block.username === 'string' ? block.username : 'default',
      password: typeof block.password === 'string' ? block.password : '',
      log: { level: ClickHouseLogLevel.OFF },
    });
    try {
      // A literal, not a query parameter: the server (Debian's 18.16) has no parameters. quoteDatabase allowed the name.
      const rs = await client.query({ query: `SELECT count() AS n FROM system.databases WHERE name = ${literal(database)}`, format: 'JSONEachRow' });
      found = Number((await rs.json<{ n: string | number }>())[0]?.n ?? 0) > 0;
    } finally {
      await client.close().catch(() => undefined);
    }
  } catch {
    return;
  }
  if (!found) throw new CliError(`no queue in database ${database} (from ${path}): the ClickHouse database does not exist`, EXIT_USAGE);
}
