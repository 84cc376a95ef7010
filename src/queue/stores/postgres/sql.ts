/**
 * The Postgres store's statements, read from the `.sql` files beside this
 * module (one per statement family, so a reader finds each query by name).
 * Each file names its schema `__SCHEMA__`; it is replaced by the validated,
 * quoted schema name. Values are always bind parameters, never spliced in.
 */
import { InvalidArgumentError } from '../../../errors.js';
import type { Claimed } from '../../types.js';
import { splitToken } from './rows.js';
import { SqlFiles, type Migration } from '../sql-files.js';

/** Schema names: lower-case identifiers short enough to leave room for the wake channel's suffix. */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,47}$/;

/** Throws `InvalidArgumentError` unless `name` is a schema name this store accepts; returns it double-quoted. */
export function quoteSchema(name: string): string {
  // pg_* and information_schema are the server's own: ferry's tables do not go there.
  if (typeof name !== 'string' || !SCHEMA_NAME.test(name) || name.startsWith('pg_') || name === 'information_schema') {
    throw new InvalidArgumentError(`postgres store: schema ${JSON.stringify(name)} must match ${SCHEMA_NAME}, not start with pg_ and not be information_schema`);
  }
  return `"${name}"`;
}

/** The NOTIFY channel of a schema's wake-ups. */
export function wakeChannel(schema: string): string {
  return `${schema}.wake`;
}

/**
 * The message seqs and the claim uuids of `cs` as a `bigint[]` and a
 * `uuid[]` parameter (`arrayLiteral`), split out of their claim tokens
 * (`splitToken`), pairwise, in seq order: the deadlock-free order every
 * statement that updates several deliveries locks them in, the primary
 * key's (one call's deliveries are one group's; seqs past 2^53 tie, which
 * only costs the order between those). A token this store did not hand out
 * is NULL in both, which no row matches: its write finds nothing held, as a
 * stale token's does.
 */
export function seqsAndTokens(cs: readonly Claimed[]): [seqs: string, tokens: string] {
  const parts = cs.map((c) => splitToken(c.claimToken) ?? [null, null]);
  parts.sort((a, b) => (a[0] === null ? -1 : Number(a[0])) - (b[0] === null ? -1 : Number(b[0])));
  return [arrayLiteral(parts.map((p) => p[0])), arrayLiteral(parts.map((p) => p[1]))];
}

/**
 * `values` as PostgreSQL's array literal, for a parameter the statement
 * casts (`text[]`, `int[]`, `bigint[]`, `timestamptz[]`): strings
 * double-quoted, with `"` and `\` escaped only where they occur; numbers as
 * they print; times as ISO 8601 in UTC; null and undefined as NULL. The
 * driver would encode the same array with two replaces per element and a
 * local-time rendering per date; append.sql takes a dozen such arrays per
 * call, and their encoding was about a tenth of a publisher's CPU in a
 * profile of batches of 100. A caller that sends the same array again and
 * again (the poll query) encodes it once.
 */
export function arrayLiteral(values: ReadonlyArray<string | number | Date | null | undefined>): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    const text = v === null || v === undefined ? 'NULL' : typeof v === 'number' ? String(v) : typeof v === 'string' ? quoted(v) : `"${v.toISOString()}"`;
    out += i === 0 ? text : `,${text}`;
  }
  return `${out}}`;
}

/** `v` as an element of an array literal: double-quoted, with `"` and `\` escaped. */
function quoted(v: string): string {
  return NEEDS_ESCAPE.test(v) ? `"${v.replace(ESCAPED, '\\$&')}"` : `"${v}"`;
}

const NEEDS_ESCAPE = /["\\]/;
const ESCAPED = /["\\]/g;

const files = new SqlFiles(new URL('./', import.meta.url));

export const STATEMENTS = [
  'lock-topics',
  'groups-of',
  'append',
  'create-group',
  'backfill-page',
  'backfill',
  'claim-lock-group',
  'claim-budget',
  'claim',
  'ack-and-claim',
  'due-pairs',
  'ack',
  'retry',
  'kill',
  'extend',
  'release',
  'purge-dead',
  'purge-victims',
  'purge-messages',
  'purge-acked-spans',
  'stats',
  'set-group-paused',
  'janitor',
  'remove-group',
  'list-groups',
  'list-messages',
  'put-schedule',
  'delete-schedule',
  'list-schedules',
  'advance-schedule',
] as const;

export type StatementName = (typeof STATEMENTS)[number];

/** Every statement with `schema` (already quoted) filled in. */
export function statements(quotedSchema: string): Record<StatementName, string> {
  const out = {} as Record<StatementName, string>;
  for (const name of STATEMENTS) out[name] = files.read(`${name}.sql`).replaceAll('__SCHEMA__', quotedSchema);
  return out;
}

/** The migrations, in order: `{ version, sql }` with the schema filled in. */
export function migrations(quotedSchema: string): Migration[] {
  return files.migrations().map((m) => ({ ...m, sql: m.sql.replaceAll('__SCHEMA__', quotedSchema) }));
}
