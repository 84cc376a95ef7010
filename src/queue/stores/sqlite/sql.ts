/**
 * The SQLite store's statements, read from the `.sql` files beside this
 * module (one per statement, named by what it does: `createGroup` is
 * create-group.sql) and prepared once per connection. Values are always bind
 * parameters (`@name`), never spliced in; delivery states are the codes of
 * ../delivery-state.ts, each followed by a comment naming it. The few
 * statements in {@link POSITIONAL} are bound by position instead.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { SqlFiles } from '../sql-files.js';

/** The folder of the store's `.sql` files: the statements, schema.sql and migrations/. */
export const files = new SqlFiles(new URL('./', import.meta.url));

/** The statements the store prepares when it opens. */
const STORE_STATEMENTS = [
  'now',
  'createGroup',
  'groupCursor',
  'groupState',
  'setGroupPaused',
  'newestRaisedSeq',
  'moveCursor',
  'newestSeq',
  'messagesPastCursor',
  'aheadOfCursor',
  'append',
  'makeDelivery',
  'inFlight',
  'claimable',
  'claimableByPriority',
  'claimsInWindow',
  'claimStarts',
  'recordClaimStarts',
  'pruneClaimStarts',
  'forgetClaimStarts',
  'lease',
  'ack',
  'unblockLane',
  'retry',
  'kill',
  'extend',
  'release',
  'purgeDead',
  'recordSeqMark',
  'finishedMessages',
  'pruneSeqMarks',
  'raisePurgedSeq',
  'deleteMessageDeliveries',
  'deleteMessage',
  'liveStats',
  'deadCount',
  'oldestDue',
  'removeGroupDeliveries',
  'removeGroup',
  'listGroups',
  'listTopicGroups',
  'listMessages',
  'janitor',
  'putSchedule',
  'deleteSchedule',
  'listSchedules',
  'advanceSchedule',
] as const;

/** The poll query's (due-pairs.ts), prepared on its first use. */
type PollStatement = 'duePairs' | 'dueGroups';

export type StatementName = (typeof STORE_STATEMENTS)[number] | PollStatement;

/** The store's prepared statements, by name. */
export type Statements = Record<(typeof STORE_STATEMENTS)[number], BetterSqlite3.Statement>;

/** Statements that return one column, whose rows are that column's values (better-sqlite3's `pluck`). */
const PLUCKED: ReadonlySet<StatementName> = new Set<StatementName>([
  'now', 'groupCursor', 'newestSeq', 'newestRaisedSeq', 'claimsInWindow', 'inFlight', 'finishedMessages', 'deadCount', 'oldestDue',
]);

/**
 * Statements run with their values as arguments, in the order their file
 * names them (each `@name` becomes `?`), rather than as an object.
 * better-sqlite3 binds an object by looking each name up on it: for the
 * nine values of a one-message append that was about a fifth of the
 * instructions of the whole insert (measured with callgrind). `prepare`
 * refuses a file whose names are not these, in this order.
 */
export const POSITIONAL = {
  append: ['id', 'topic', 'key', 'payload', 'headers', 'publishedAt', 'deliverAt', 'dueAt', 'priority'],
} as const satisfies Partial<Record<StatementName, readonly string[]>>;

/** `sql` with each `@name` outside a comment turned into `?`; throws unless the names are `names`, in order. */
export function bindByPosition(name: string, sql: string, names: readonly string[]): string {
  const found: string[] = [];
  const out = sql
    .split('\n')
    .map((line) => {
      const at = line.indexOf('--');
      const code = at < 0 ? line : line.slice(0, at);
      return code.replace(/@([A-Za-z]\w*)/g, (_, n: string) => (found.push(n), '?')) + (at < 0 ? '' : line.slice(at));
    })
    .join('\n');
  if (found.join() !== names.join()) throw new Error(`${name}: its file binds ${found.join(', ')}, not ${names.join(', ')}`);
  return out;
}

/** The file of statement `name`: its words in kebab case. */
const fileOf = (name: StatementName): string => `${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}.sql`;

/**
 * The text of statement `name`. A condition two statements share is a file
 * of its own, written into them as `__NAME__` (due-delivery.sql is
 * `__DUE_DELIVERY__`).
 */
function text(name: StatementName): string {
  return files.read(fileOf(name)).replace(/__([A-Z]+(?:_[A-Z]+)*)__/g, (_, part: string) => files.read(`${part.toLowerCase().replaceAll('_', '-')}.sql`));
}

/** Prepares statement `name` on `db`. */
export function prepare(db: BetterSqlite3.Database, name: StatementName): BetterSqlite3.Statement {
  const names = (POSITIONAL as Partial<Record<StatementName, readonly string[]>>)[name];
  const s = db.prepare(names === undefined ? text(name) : bindByPosition(name, text(name), names));
  return PLUCKED.has(name) ? s.pluck() : s;
}

/** Prepares every statement the store uses from its opening on. */
export function prepareStatements(db: BetterSqlite3.Database): Statements {
  const out = {} as Statements;
  for (const name of STORE_STATEMENTS) out[name] = prepare(db, name);
  return out;
}
