/**
 * The ClickHouse store's statements, read from `sql/` beside this module (one
 * file per statement, named by what it does), and its numbered migrations,
 * read from `migrations/` (`NNN_name.sql`, see migrate.ts). A file names its database
 * `__DB__` and its values `{name}`; `render` replaces the first with the
 * validated, back-quoted database name and each value with `literal(value)`,
 * the one audited escaping function (escape.ts). Nothing else reaches the SQL.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { InvalidArgumentError } from '../../../errors.js';
import { literal, tuple } from './escape.js';
import type { SqlValue } from './escape.js';

/** Database names: identifiers, short. */
const DATABASE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/** The database `ClickHouseStore.open` uses when none is named. */
export const DEFAULT_CLICKHOUSE_DATABASE = 'ferry';

/** Throws `InvalidArgumentError` unless `name` is a database name this store accepts; returns it back-quoted. */
export function quoteDatabase(name: string): string {
  if (typeof name !== 'string' || !DATABASE_NAME.test(name) || name === 'system') {
    throw new InvalidArgumentError(`clickhouse store: database ${JSON.stringify(name)} must match ${DATABASE_NAME} and not be system`);
  }
  return `\`${name}\``;
}

export const STATEMENTS = [
  'create-database',
  'create-migrations',
  'schema-version',
  'insert-migration',
  'column-exists',
  'server-version',
  'server-seconds',
  'server-milliseconds',
  'topic-sequences',
  'groups-of',
  'live-message-ids',
  'insert-topics',
  'insert-groups',
  'insert-messages',
  'insert-deliveries',
  'insert-janitor',
  'group-exists',
  'group-delivery-ids',
  'backfill-page',
  'live-deliveries',
  'due-pairs',
  'deliveries-by-id',
  'messages-by-id',
  'stats',
  'purge-dead-candidates',
  'purge-message-candidates',
  'purge-messages-recheck',
  'tombstone-dead',
  'tombstone-acked-of-messages',
  'tombstone-messages',
  'janitor-holder',
  'list-groups',
  'list-messages',
  'tombstone-group-deliveries',
  'claim-starts',
  'insert-claim-starts',
  'schedule-state',
  'list-schedules',
  'insert-schedules',
  'advance-schedule',
] as const;

export type StatementName = (typeof STATEMENTS)[number];

const here = new URL('./sql/', import.meta.url);
const migrationsDir = new URL('./migrations/', import.meta.url);

/** Drops `--` comment lines (the files' own documentation) so they never reach the server. */
function stripComments(text: string): string {
  return text
    .split('\n')
    .filter((l) => !l.trimStart().startsWith('--'))
    .join('\n')
    .trim();
}

/** Every statement with the database filled in. */
export function statements(quotedDatabase: string): Record<StatementName, string> {
  const out = {} as Record<StatementName, string>;
  for (const name of STATEMENTS) out[name] = stripComments(readFileSync(new URL(`${name}.sql`, here), 'utf8')).replaceAll('__DB__', quotedDatabase);
  return out;
}

/** One numbered migration: its version (the file's number), file name and statements, with the database filled in. */
export interface Migration {
  version: number;
  name: string;
  statements: string[];
}

/** The migrations in `migrations/`, in version order, with the database filled in. */
export function migrations(quotedDatabase: string): Migration[] {
  return readdirSync(migrationsDir)
    .filter((f) => /^\d+_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((f) => ({
      version: Number.parseInt(f, 10),
      name: f,
      statements: splitStatements(stripComments(readFileSync(new URL(f, migrationsDir), 'utf8')).replaceAll('__DB__', quotedDatabase)),
    }));
}

const PLACEHOLDER = /\{([a-z_]+)\}/g;

/**
 * `template` with each `{name}` replaced by the literal of `values[name]`.
 * @throws InvalidArgumentError a placeholder without a value (a bug), or a value `literal` refuses.
 */
export function render(template: string, values: Record<string, SqlValue> = {}): string {
  return template.replace(PLACEHOLDER, (_, name: string) => {
    const v = values[name];
    if (v === undefined) throw new InvalidArgumentError(`clickhouse store: statement needs a value for {${name}}`);
    // Lists only ever follow IN, which takes a tuple (an array is one value there).
    if (Array.isArray(v)) {
      if (v.length === 0) throw new InvalidArgumentError(`clickhouse store: {${name}} is an empty list`);
      return `(${v.map(literal).join(', ')})`;
    }
    return literal(v);
  });
}

/** An `INSERT … VALUES` statement: `header` (an insert-*.sql file) followed by one tuple per row. */
export function insertRows(header: string, rows: readonly (readonly SqlValue[])[]): string {
  return `${header} ${rows.map(tuple).join(',\n')}`;
}

/** The statements of a multi-statement file, split at lines holding only `;`. */
export function splitStatements(text: string): string[] {
  return text
    .split(/\n;\s*(?:\n|$)/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
}
