/**
 * Which database errors a retry can help, for every store in one place. A
 * store wraps a driver or server error in an `IOError` whose `transient` is
 * the answer of the function for its database below; the engine asks
 * {@link isTransient} before retrying a call.
 *
 * The rule is the same for each database: a lost, refused, frozen or timed-out
 * connection, a busy or locked database, a deadlock or serialization failure,
 * an overloaded or shutting-down server may pass; an error about the
 * statement or its data (syntax, an unknown table or column, a type or
 * constraint violation, a missing right, a read-only, full or corrupt
 * database) will be met again, so it fails at once. An error a database does
 * not classify (no code) is taken as transient: it is most likely the
 * connection's.
 */
import { FerryError, IOError } from '../../errors.js';

/**
 * Whether a store call that threw `err` may succeed if made again. ferry's
 * own errors are answers (closed, invalid, unsupported, too large), except an
 * `IOError`, which answers by its `transient`; an error that is not ferry's
 * (a store that does not wrap its driver's) is taken as transient.
 */
export function isTransient(err: unknown): boolean {
  if (err instanceof IOError) return err.transient;
  return !(err instanceof FerryError);
}

/** SQLSTATE classes and codes after which a retry can help. */
const PG_TRANSIENT_CLASSES = new Set([
  '08', // connection exception
  '53', // insufficient resources: too many connections (53300), out of memory, disk full on the server (53100) may clear
  '58', // system error: I/O error on the server
]);
const PG_TRANSIENT_CODES = new Set([
  '40001', // serialization failure
  '40P01', // deadlock detected
  '55P03', // lock not available (lock_timeout)
  '57014', // query canceled (statement_timeout, pg_cancel_backend)
  '57P01', // admin shutdown
  '57P02', // crash shutdown
  '57P03', // cannot connect now (starting up, recovering)
  '57P05', // idle session timeout
  '25P03', // idle in transaction session timeout
]);

/**
 * A Postgres error: transient by its SQLSTATE (`code`) when the server sent
 * one; a driver error without one (a dropped socket, `Connection terminated`,
 * a client-side query timeout, `ECONNREFUSED`) is the connection's, so
 * transient. Data (22), integrity (23), syntax and access (42, 42501 among
 * them), and every other class fail at once.
 */
export function postgresTransient(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return true;
  return PG_TRANSIENT_CODES.has(code) || PG_TRANSIENT_CLASSES.has(code.slice(0, 2));
}

/** better-sqlite3 error codes (primary, extended codes start with them) after which a retry can help. */
const SQLITE_TRANSIENT = ['SQLITE_BUSY', 'SQLITE_LOCKED', 'SQLITE_IOERR', 'SQLITE_PROTOCOL', 'SQLITE_INTERRUPT'];

/**
 * A SQLite error (better-sqlite3's error, whose `code` is the
 * extended result code's name): `SQLITE_BUSY`, `SQLITE_LOCKED` and their
 * extended codes, an I/O error or an interrupt may pass; `SQLITE_READONLY`,
 * `SQLITE_FULL`, `SQLITE_CORRUPT`, `SQLITE_NOTADB`, `SQLITE_CONSTRAINT`,
 * `SQLITE_TOOBIG`, `SQLITE_MISMATCH`, a syntax error (`SQLITE_ERROR`) and every
 * other code fail at once. An error with no code is not SQLite's: transient.
 */
export function sqliteTransient(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !code.startsWith('SQLITE_')) return true;
  return SQLITE_TRANSIENT.some((c) => code === c || code.startsWith(`${c}_`));
}

/** ClickHouse server error codes after which a retry can help. */
const CLICKHOUSE_TRANSIENT_CODES = new Set([
  '3', // UNEXPECTED_END_OF_FILE
  '159', // TIMEOUT_EXCEEDED
  '164', // READONLY (a replica in read-only mode, e.g. lost its keeper session)
  '202', // TOO_MANY_SIMULTANEOUS_QUERIES
  '203', // NO_FREE_CONNECTION
  '209', // SOCKET_TIMEOUT
  '210', // NETWORK_ERROR
  '236', // ABORTED
  '241', // MEMORY_LIMIT_EXCEEDED
  '242', // TABLE_IS_READ_ONLY
  '252', // TOO_MANY_PARTS
  '285', // TOO_FEW_LIVE_REPLICAS
  '319', // UNKNOWN_STATUS_OF_INSERT
  '394', // QUERY_WAS_CANCELLED
  '425', // SYSTEM_ERROR
  '473', // DEADLOCK_AVOIDED
  '999', // KEEPER_EXCEPTION
]);

/**
 * A ClickHouse error, by the server's numeric code (see `clickhouseCode`): the codes above (too many queries, timeouts,
 * network and keeper trouble) may pass, and every other server code
 * (syntax 62, unknown table 60, type mismatch 53, …) fails at once. An error
 * without a server code is the transport's (refused or reset connection,
 * request timeout, an HTTP 5xx from a proxy): transient.
 */
export function clickhouseTransient(err: unknown): boolean {
  const code = clickhouseCode(err);
  return code === undefined || CLICKHOUSE_TRANSIENT_CODES.has(code);
}

/**
 * The server's error code of a ClickHouse error: the client's `code` when it
 * parsed one, else the `Code: 62, …` / `Code: 62. …` the server's text starts
 * with (the client does not parse the older servers' form). Node system
 * errors (ECONNREFUSED, ECONNRESET…) have codes that are not numbers: none.
 */
export function clickhouseCode(err: unknown): string | undefined {
  const e = err as { code?: unknown; message?: unknown } | null;
  if (typeof e?.code === 'string' && /^\d+$/.test(e.code)) return e.code;
  if (typeof e?.message === 'string') return /^Code: (\d+)[.,]/.exec(e.message)?.[1];
  return undefined;
}
