/**
 * Errors say whether a retry can help. For each database, errors the real
 * driver raises (and, where a server cannot be made to raise one on demand,
 * the driver's error shape with that code) are classified: connection
 * trouble, timeouts, busy/locked databases, deadlocks and overload are
 * transient; data, syntax, permission, constraint, read-only, full and
 * corrupt are not. Through the stores, the `IOError` they throw carries the
 * answer in `transient`, and `isTransient` is what a caller asks.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import pg from 'pg';
import { ClosedError, InvalidArgumentError, IOError } from '../../src/errors.js';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { SqliteStore } from '../../src/queue/stores/sqlite/store.js';
import { clickhouseCode, clickhouseTransient, isTransient, postgresTransient, sqliteTransient } from '../../src/queue/stores/transient.js';
import { tempDir } from '../helpers/tmp.js';
import { claimReq, msg } from '../stores/helpers.js';
import { CLICKHOUSE_SKIP, CLICKHOUSE_URL } from '../stores/clickhouse-env.js';
import { POSTGRES_DIRECT_URL, POSTGRES_SKIP, POSTGRES_URL, adminPool, dropSchema, testSchema } from '../stores/postgres-env.js';

/** The error `fn` throws or rejects with. */
async function errorOf(fn: () => unknown): Promise<unknown> {
  try {
    await fn();
  } catch (err) {
    return err;
  }
  assert.fail('expected an error');
}

describe('isTransient', () => {
  it('IOError answers by its flag, other ferry errors are answers, foreign errors are transient', () => {
    assert.equal(isTransient(new IOError('x')), true);
    assert.equal(isTransient(new IOError('x', { transient: false })), false);
    assert.equal(isTransient(new ClosedError()), false);
    assert.equal(isTransient(new InvalidArgumentError('x')), false);
    assert.equal(isTransient(new Error('socket hang up')), true);
  });
});

describe('postgres errors', { skip: POSTGRES_SKIP }, () => {
  const query = async (sql: string) => {
    const c = new pg.Client({ connectionString: POSTGRES_DIRECT_URL });
    await c.connect();
    try {
      return await c.query(sql);
    } finally {
      await c.end();
    }
  };

  it('data (22), integrity (23), syntax (42), undefined table (42P01) and permission (42501) fail at once', async () => {
    const cases: Array<[string, string]> = [
      ['22012', 'SELECT 1/0'],
      ['22P02', "SELECT 'x'::int"],
      ['23505', 'CREATE TEMP TABLE u (k int PRIMARY KEY); INSERT INTO u VALUES (1), (1)'],
      ['42601', 'SELEC 1'],
      ['42P01', 'SELECT * FROM no_such_table_here'],
      ['42501', "DO $$ BEGIN RAISE insufficient_privilege USING MESSAGE = 'permission denied for table t'; END $$"],
    ];
    for (const [code, sql] of cases) {
      const err = await errorOf(() => query(sql));
      assert.equal((err as { code?: string }).code, code, sql);
      assert.equal(postgresTransient(err), false, `${code} (${sql})`);
    }
  });

  it('a cancelled statement (57014), a deadlock (40P01) and an administrator\'s termination (57P01) may pass', async () => {
    const cancelled = await errorOf(() => query("SET statement_timeout = '10ms'; SELECT pg_sleep(5)"));
    assert.equal((cancelled as { code?: string }).code, '57014');
    assert.equal(postgresTransient(cancelled), true);

    // Two sessions lock two rows in opposite orders: the server aborts one.
    const a = new pg.Client({ connectionString: POSTGRES_DIRECT_URL });
    const b = new pg.Client({ connectionString: POSTGRES_DIRECT_URL });
    await a.connect();
    await b.connect();
    const table = `ferry_deadlock_${process.pid}`;
    try {
      await a.query(`CREATE TABLE ${table} (k int PRIMARY KEY); INSERT INTO ${table} VALUES (1), (2)`);
      await a.query('BEGIN');
      await b.query('BEGIN');
      await a.query(`UPDATE ${table} SET k = k WHERE k = 1`);
      await b.query(`UPDATE ${table} SET k = k WHERE k = 2`);
      const results = await Promise.allSettled([a.query(`UPDATE ${table} SET k = k WHERE k = 2`), b.query(`UPDATE ${table} SET k = k WHERE k = 1`)]);
      const failed = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason as { code?: string });
      assert.equal(failed.length, 1);
      assert.equal(failed[0]!.code, '40P01');
      assert.equal(postgresTransient(failed[0]), true);
    } finally {
      await a.query('ROLLBACK').catch(() => undefined);
      await b.query('ROLLBACK').catch(() => undefined);
      await adminPool.query(`DROP TABLE IF EXISTS ${table}`);
      await a.end();
      await b.end();
    }

    const victim = new pg.Client({ connectionString: POSTGRES_DIRECT_URL });
    victim.on('error', () => undefined);
    await victim.connect();
    const pid = (await victim.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const sleeping = errorOf(() => victim.query('SELECT pg_sleep(30)'));
    await new Promise((r) => setTimeout(r, 100));
    await adminPool.query('SELECT pg_terminate_backend($1)', [pid]);
    const terminated = await sleeping;
    assert.equal((terminated as { code?: string }).code, '57P01');
    assert.equal(postgresTransient(terminated), true);
    await victim.end().catch(() => undefined);
  });

  it('serialization failure, too many connections, shutdowns, connection class 08 and a refused socket may pass', async () => {
    for (const code of ['40001', '53300', '57P02', '57P03', '08006', '08001']) {
      const e = new pg.DatabaseError('from the server', 0, 'error');
      e.code = code;
      assert.equal(postgresTransient(e), true, code);
    }
    // Nothing listens on port 1.
    const refused = await errorOf(() => new pg.Client({ host: '127.0.0.1', port: 1, user: 'x' }).connect());
    assert.equal((refused as { code?: string }).code, 'ECONNREFUSED');
    assert.equal(postgresTransient(refused), true);
  });

  describe('through the store', () => {
    const schema = testSchema('transient');
    after(() => dropSchema(schema));

    it('a data error is an IOError that is not transient, with the server message; a refused connection is transient', async () => {
      const store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 1 });
      try {
        await store.ensureGroup('t', 'g', 'latest');
        // Postgres text cannot hold NUL: the server refuses the value (22021).
        const err = await errorOf(() => store.append([msg('t', { key: 'a\u0000b' })]));
        assert.ok(err instanceof IOError, String(err));
        assert.equal(err.transient, false);
        assert.match(err.message, /invalid byte sequence|0x00/);
        assert.equal(isTransient(err), false);
        // The store goes on working on the same (one) connection.
        assert.deepEqual(await store.claim(claimReq('t', 'g')), []);
      } finally {
        await store.close();
      }
      const err = await errorOf(() => PostgresStore.open({ connectionString: 'postgres://127.0.0.1:1/test', schema, connectTimeoutMs: 5000 }));
      assert.ok(err instanceof IOError && err.transient, String(err));
    });
  });
});

describe('sqlite errors', () => {
  it('SQLITE_BUSY and SQLITE_LOCKED may pass; READONLY, FULL, CORRUPT, NOTADB and CONSTRAINT fail at once', () => {
    const dir = tempDir();
    {
      const path = join(dir, 'db.sqlite');
      const a = new Database(path, { timeout: 0 });
      const b = new Database(path, { timeout: 0 });
      a.exec('CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB)');
      a.exec('BEGIN IMMEDIATE');
      const busy = (() => {
        try {
          b.exec('BEGIN IMMEDIATE');
        } catch (err) {
          return err;
        }
      })();
      a.exec('ROLLBACK');
      assert.equal((busy as { code?: string }).code, 'SQLITE_BUSY');
      assert.equal(sqliteTransient(busy), true);

      const constraint = (() => {
        try {
          a.exec('INSERT INTO t (k) VALUES (1), (1)');
        } catch (err) {
          return err;
        }
      })();
      assert.match((constraint as { code?: string }).code!, /^SQLITE_CONSTRAINT/);
      assert.equal(sqliteTransient(constraint), false);

      a.pragma('max_page_count = 4');
      const full = (() => {
        try {
          a.prepare('INSERT INTO t (v) VALUES (?)').run(Buffer.alloc(64 * 1024));
        } catch (err) {
          return err;
        }
      })();
      assert.equal((full as { code?: string }).code, 'SQLITE_FULL');
      assert.equal(sqliteTransient(full), false);
      a.close();
      b.close();

      const ro = new Database(path, { readonly: true });
      const readonly = (() => {
        try {
          ro.exec('INSERT INTO t (k) VALUES (2)');
        } catch (err) {
          return err;
        }
      })();
      ro.close();
      assert.equal((readonly as { code?: string }).code, 'SQLITE_READONLY');
      assert.equal(sqliteTransient(readonly), false);

      const junk = join(dir, 'junk.sqlite');
      writeFileSync(junk, Buffer.alloc(8192, 0x41));
      const notadb = (() => {
        try {
          new Database(junk).pragma('user_version');
        } catch (err) {
          return err;
        }
      })();
      assert.equal((notadb as { code?: string }).code, 'SQLITE_NOTADB');
      assert.equal(sqliteTransient(notadb), false);

      // Corruption and a locked shared-cache table cannot be made on demand here: the driver's shape.
      assert.equal(sqliteTransient(Object.assign(new Error('database disk image is malformed'), { code: 'SQLITE_CORRUPT' })), false);
      assert.equal(sqliteTransient(Object.assign(new Error('database table is locked'), { code: 'SQLITE_LOCKED_SHAREDCACHE' })), true);
      assert.equal(sqliteTransient(Object.assign(new Error('busy'), { code: 'SQLITE_BUSY_SNAPSHOT' })), true);
    }
  });

  it('through the store: a write refused as busy is a transient IOError', async () => {
    const dir = tempDir();
    const path = join(dir, 'q.sqlite');
    const store = await SqliteStore.open({ path, busyTimeoutMs: 0 });
    const other = new Database(path, { timeout: 0 });
    try {
      await store.ensureGroup('t', 'g', 'latest');
      other.exec('BEGIN IMMEDIATE');
      const err = await errorOf(() => store.append([msg('t')]));
      assert.ok(err instanceof IOError, String(err));
      assert.equal(err.transient, true);
      assert.equal((err.cause as { code?: string }).code, 'SQLITE_BUSY');
      other.exec('ROLLBACK');
      await store.append([msg('t')]);
    } finally {
      other.close();
      await store.close();
    }
  });
});

describe('clickhouse errors', () => {
  it('an unanswering port, a refused connection and a 5xx from a proxy may pass; a server-side TOO_MANY_SIMULTANEOUS_QUERIES too', async () => {
    const { createClient } = await import('@clickhouse/client');
    const refused = createClient({ url: 'http://127.0.0.1:1', request_timeout: 5000 });
    try {
      const err = await errorOf(() => refused.query({ query: 'SELECT 1' }));
      assert.equal(clickhouseTransient(err), true, String(err));
    } finally {
      await refused.close();
    }
    const http = createServer((_req, res) => {
      res.statusCode = 503;
      res.end('no healthy upstream');
    });
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
    const unavailable = createClient({ url: `http://127.0.0.1:${(http.address() as { port: number }).port}`, request_timeout: 5000 });
    try {
      const err = await errorOf(() => unavailable.query({ query: 'SELECT 1' }));
      assert.equal(clickhouseTransient(err), true, String(err));
    } finally {
      await unavailable.close();
      await new Promise((resolve) => http.close(resolve));
    }
    const { ClickHouseError } = await import('@clickhouse/client');
    assert.equal(clickhouseTransient(new ClickHouseError({ message: 'Too many simultaneous queries', code: '202', type: 'TOO_MANY_SIMULTANEOUS_QUERIES' })), true);
    assert.equal(clickhouseTransient(new ClickHouseError({ message: 'Timeout exceeded', code: '159', type: 'TIMEOUT_EXCEEDED' })), true);
  });

  it('syntax, unknown table and type errors from the server fail at once', { skip: CLICKHOUSE_SKIP }, async () => {
    const { createClient } = await import('@clickhouse/client');
    const { ClickHouseLogLevel } = await import('@clickhouse/client');
    const client = createClient({ url: CLICKHOUSE_URL, log: { level: ClickHouseLogLevel.OFF } });
    try {
      for (const [code, query] of [
        ['62', 'SELEC 1'], // SYNTAX_ERROR
        ['60', 'SELECT * FROM default.no_such_table_here'], // UNKNOWN_TABLE
        ['6', "SELECT toUInt8('abc')"], // CANNOT_PARSE_TEXT
        ['43', "SELECT 1 + 'a'"], // ILLEGAL_TYPE_OF_ARGUMENT
      ] as const) {
        const err = await errorOf(async () => (await client.query({ query, format: 'JSONEachRow' })).json());
        // Older servers answer in a form the client does not parse (no `code`): the text still names it.
        assert.equal(clickhouseCode(err), code, query);
        assert.equal(clickhouseTransient(err), false, query);
      }
    } finally {
      await client.close();
    }
  });
});
