/**
 * How ferry's Postgres code connects: the user name libpq would pick, and the
 * timeouts that keep a call from waiting forever on a server that stopped
 * answering. Shared by the store and `PostgresLocker`.
 */
import { userInfo } from 'node:os';
import type pg from 'pg';
import { InvalidArgumentError } from '../../../errors.js';


/** The schema a Postgres store uses when its options name none. */
export const DEFAULT_POSTGRES_SCHEMA = 'ferry';

/** Default of `connectTimeoutMs`: opening a connection, or waiting for a free one in the pool. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;
/** Default of `statementTimeoutMs`: the server cancels a statement running longer. */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 10_000;
/** Default of `queryTimeoutMs`: the store gives up on an answer that has not come, and drops the connection. */
export const DEFAULT_QUERY_TIMEOUT_MS = 15_000;
/** Default of `closeGraceMs`: how long `close()` lets calls still running end before it cuts their connections. */
export const DEFAULT_CLOSE_GRACE_MS = 1000;
/** Largest timeout accepted (the longest Node timer). */
const MAX_TIMEOUT_MS = 2 ** 31 - 1;

/** The timeouts of a Postgres store, all in ms. */
export interface PostgresTimeouts {
  connectTimeoutMs: number;
  statementTimeoutMs: number;
  queryTimeoutMs: number;
  closeGraceMs: number;
}

/**
 * Checks the timeout options (integers; `connectTimeoutMs` at least 1, the
 * others 0 for none) and fills in the defaults.
 * @throws InvalidArgumentError a value that is not such an integer.
 */
export function resolveTimeouts(opts: Partial<Record<keyof PostgresTimeouts, unknown>>, who: string): PostgresTimeouts {
  const one = (name: keyof PostgresTimeouts, dflt: number, min: number): number => {
    const v = opts[name] ?? dflt;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > MAX_TIMEOUT_MS) {
      throw new InvalidArgumentError(`${who}: ${name} must be an integer from ${min} to ${MAX_TIMEOUT_MS} (ms), got ${typeof v === 'string' ? JSON.stringify(v) : String(v)}`);
    }
    return v;
  };
  return {
    connectTimeoutMs: one('connectTimeoutMs', DEFAULT_CONNECT_TIMEOUT_MS, 1),
    statementTimeoutMs: one('statementTimeoutMs', DEFAULT_STATEMENT_TIMEOUT_MS, 0),
    queryTimeoutMs: one('queryTimeoutMs', DEFAULT_QUERY_TIMEOUT_MS, 0),
    closeGraceMs: one('closeGraceMs', DEFAULT_CLOSE_GRACE_MS, 0),
  };
}

/**
 * The user name to connect as when neither `connectionString` nor `PGUSER`
 * names one and `pg` found none in `$USER`: the operating system's login
 * name, as libpq does. Undefined when one is named (pg's own choice stands)
 * or the login name cannot be read.
 */
export function fallbackUser(driver: typeof pg, connectionString: string | undefined): string | undefined {
  if (process.env.PGUSER || (driver.defaults as { user?: string }).user) return undefined;
  if (connectionString !== undefined && urlUser(connectionString)) return undefined;
  try {
    return userInfo().username || undefined;
  } catch {
    return undefined;
  }
}

/** The user a connection string names, in its authority or as a `user=` parameter; '' when none. */
function urlUser(connectionString: string): string {
  try {
    const u = new URL(connectionString);
    return decodeURIComponent(u.username) || u.searchParams.get('user') || '';
  } catch {
    // A URL pg reads that is not a WHATWG one (postgres://app@/db?host=/socket): its authority and query by hand.
    const authority = /^[a-z][a-z0-9+.-]*:\/\/([^@/?#]*)@/i.exec(connectionString)?.[1];
    if (authority) {
      const name = authority.split(':')[0]!;
      try {
        return decodeURIComponent(name);
      } catch {
        return name;
      }
    }
    // (A keyword/value string never gets here: poolConfig refuses it first.)
    return connectionString.includes('?') ? (queryOf(connectionString).params.get('user') ?? '') : '';
  }
}

/**
 * Makes `cfg` connect as `user`. pg lets a connection string's empty user
 * override a `user` setting beside it, so for a URL the name goes into the
 * URL: its authority when it has a host, else a `user` query parameter
 * (`postgres:///db?host=/socket`, `socket:/dir?db=name`). A socket path
 * followed by a database name carries no user: there `cfg.user` is read.
 */
function withUser(cfg: pg.PoolConfig, user: string | undefined): void {
  if (user === undefined) return;
  const cs = cfg.connectionString!;
  if (cs.startsWith('/')) {
    cfg.user = user;
    return;
  }
  try {
    const u = new URL(cs);
    if (u.host !== '') {
      u.username = encodeURIComponent(user);
      cfg.connectionString = u.toString();
      return;
    }
  } catch {
    // Not a WHATWG URL (postgres://user@/db?host=...): the query below.
  }
  const url = queryOf(cs);
  url.params.set('user', user);
  cfg.connectionString = url.join();
}

/**
 * A connection string's query parameters, to edit as text: URLs pg accepts
 * (`postgres://user@/db?host=/socket`) are not all WHATWG URLs. A `#`
 * fragment, which pg ignores, stays after the query.
 */
function queryOf(cs: string): { params: URLSearchParams; join(): string } {
  const hash = cs.indexOf('#');
  const body = hash >= 0 ? cs.slice(0, hash) : cs;
  const fragment = hash >= 0 ? cs.slice(hash) : '';
  const q = body.indexOf('?');
  const params = new URLSearchParams(q >= 0 ? body.slice(q + 1) : '');
  return { params, join: () => `${q >= 0 ? body.slice(0, q) : body}?${params.toString()}${fragment}` };
}

/** What pg reads as a connection string: a URL (postgres://, postgresql://, socket:) or a socket directory followed by a database name. */
const PG_CONNECTION_STRING = /^[\t\n\r]*(?:[a-z][a-z0-9+.-]*:|\/)/i;

/**
 * Session settings of the store's own connections, as libpq `options`: each
 * prepared statement is planned once per connection (a generic plan) rather
 * than for every call's values (planning a claim took about 0.7 ms a call
 * at 300,000 pending rows, a fifth of running it); and no JIT compilation,
 * which a generic plan's estimated cost (it cannot see a claim's LIMIT, so
 * it grows with the backlog) would turn on at about ten million rows.
 * test/queue/postgres-plans.test.ts checks that every hot statement's
 * generic plan reads through indexes only.
 */
export const POSTGRES_SESSION_OPTIONS = '-c plan_cache_mode=force_generic_plan -c jit=off';

/**
 * Settings of a pool ferry opens itself: size, user fallback, timeouts, TCP
 * keep-alive, and `sessionOptions` (libpq `options`), which options the
 * connection string or `PGOPTIONS` gives override.
 * @throws InvalidArgumentError `connectionString` is not a form pg reads (a keyword/value string, a malformed URL).
 */
export function poolConfig(driver: typeof pg, connectionString: string, max: number, t?: PostgresTimeouts, sessionOptions?: string): pg.PoolConfig {
  if (!PG_CONNECTION_STRING.test(connectionString)) {
    // pg would read the whole string as a database name on host "base".
    throw new InvalidArgumentError(
      `postgres: connectionString must be a URL such as postgres://user@host:5432/db (or socket:/dir?db=name); keyword/value strings like "host=... dbname=..." are not read by pg`,
    );
  }
  const cfg: pg.PoolConfig = { connectionString, max, keepAlive: true };
  withUser(cfg, fallbackUser(driver, connectionString));
  if (sessionOptions !== undefined) withOptions(cfg, sessionOptions);
  try {
    // pg parses the string when a client is made (nothing connects): a URL it
    // cannot parse fails here, once, not on every connection as a transient error.
    new driver.Client(cfg);
  } catch (err) {
    throw new InvalidArgumentError(`postgres: connectionString cannot be read: ${(err as Error).message}`);
  }
  if (t) {
    cfg.connectionTimeoutMillis = t.connectTimeoutMs;
    if (t.statementTimeoutMs > 0) {
      cfg.statement_timeout = t.statementTimeoutMs;
      // A client that stops mid-transaction holds its row locks no longer than a statement may run.
      cfg.idle_in_transaction_session_timeout = Math.max(t.statementTimeoutMs, t.queryTimeoutMs);
    }
    if (t.queryTimeoutMs > 0) cfg.query_timeout = t.queryTimeoutMs;
  }
  return cfg;
}

/**
 * Puts libpq `options` before those the user gives, so that a setting the
 * user names wins (a later `-c` of the same name does). pg takes the last
 * `options` parameter of a connection string over an `options` setting, and
 * `PGOPTIONS` only when neither is given: ours join whichever of the three
 * is in force. A socket path followed by a database name has no query.
 */
function withOptions(cfg: pg.PoolConfig, options: string): void {
  if (!cfg.connectionString!.startsWith('/')) {
    const url = queryOf(cfg.connectionString!);
    const given = url.params.getAll('options');
    if (given.length > 0) {
      url.params.delete('options');
      url.params.append('options', `${options} ${given[given.length - 1]}`);
      cfg.connectionString = url.join();
      return;
    }
  }
  const env = process.env.PGOPTIONS;
  cfg.options = env ? `${options} ${env}` : options;
}

/** Destroys `client`'s socket at once (pg's own `end` first waits for the server). */
export function destroySocket(client: pg.Client): void {
  (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
}

/**
 * Ends a client that may sit on a connection nobody answers: a polite end
 * first, then, after `graceMs`, the socket is destroyed. Never rejects.
 */
export async function endClient(client: pg.Client, graceMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const ended = client.end().catch(() => undefined);
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), graceMs)));
  try {
    if ((await Promise.race([ended, late])) === 'late') {
      destroySocket(client);
      await ended;
    }
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The pg driver's wording of its client-side timeouts, named by the
 * options that set them (`IOErrorSource.reword` of the store and the
 * locker); any other message is left as it is.
 */
export function pgTimeoutWording(text: string): string | undefined {
  if (text === 'Query read timeout') return 'no answer within queryTimeoutMs (the driver\'s "Query read timeout")';
  if (text === 'timeout exceeded when trying to connect' || text === 'Connection terminated due to connection timeout') return `no connection within connectTimeoutMs (the driver's "${text}")`;
  return undefined;
}
