/**
 * The documented default connection, a URL naming no user, works where
 * neither USER nor PGUSER is set (a container, a service manager): the store,
 * its LISTEN connection and the Postgres locker connect as the operating
 * system's login name, as libpq does, instead of failing with "no PostgreSQL
 * user name specified in startup packet".
 */
import assert from 'node:assert/strict';
import { spawnChild } from '../helpers/children.js';
import { userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { InvalidArgumentError } from '../../src/errors.js';
import { fallbackUser, poolConfig } from '../../src/queue/stores/postgres/connection.js';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { POSTGRES_SKIP, POSTGRES_URL, dropSchema, testSchema } from '../stores/postgres-env.js';

const here = dirname(fileURLToPath(import.meta.url));
const namesUser = new URL(POSTGRES_URL).username !== '';

describe('postgres without USER or PGUSER', { skip: POSTGRES_SKIP ?? (namesUser ? 'FERRY_TEST_POSTGRES_URL names a user' : undefined) }, () => {
  const schema = testSchema('nouser');
  after(() => dropSchema(schema));

  it('a store, its listener and a locker open on a URL naming no user', { timeout: 120_000 }, async () => {
    const env = { ...process.env };
    delete env.USER;
    delete env.PGUSER;
    delete env.USERNAME;
    const child = spawnChild(process.execPath, ['--import', 'tsx', join(here, 'fixtures', 'pg-no-user.ts'), POSTGRES_URL, schema], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    assert.equal(code, 0, `the child failed: ${err}`);
    assert.equal(out, 'ok\n');
  });
});

describe('fallbackUser', () => {
  it('a keyword/value connection string is refused with InvalidArgumentError when the store opens', async () => {
    await assert.rejects(PostgresStore.open({ connectionString: 'host=127.0.0.1 dbname=test' }), (err: unknown) => err instanceof InvalidArgumentError && /must be a URL/.test((err as Error).message));
  });

  it('names the login name only when the URL, PGUSER and USER name nobody', () => {
    const saved = { PGUSER: process.env.PGUSER, user: (pg.defaults as { user?: string }).user };
    try {
      delete process.env.PGUSER;
      (pg.defaults as { user?: string }).user = undefined;
      assert.equal(fallbackUser(pg, 'postgres://localhost/test'), userInfo().username);
      assert.equal(fallbackUser(pg, 'postgres://app@localhost/test'), undefined);
      assert.equal(fallbackUser(pg, 'postgres://localhost/test?user=app'), undefined);
      // A keyword/value string is refused before any user is chosen for it.
      assert.throws(() => poolConfig(pg, 'host=/tmp user=app dbname=test', 1), InvalidArgumentError);
      assert.equal(fallbackUser(pg, 'postgres://app@/test?host=/var/run/postgresql'), undefined);
      assert.equal(fallbackUser(pg, 'postgres://%61pp:pw@/test?host=/var/run/postgresql'), undefined);
      assert.equal(fallbackUser(pg, 'socket:/var/run/postgresql?db=test&user=app'), undefined);
      // The user pg will connect as, for each form pg reads.
      const login = userInfo().username;
      /** The parameters a pg client made from ferry's settings connects with (nothing is opened). */
      const params = (cs: string) => (new pg.Client(poolConfig(pg, cs, 1)) as unknown as { connectionParameters: { user: string; host: string } }).connectionParameters;
      const userOf = (cs: string) => params(cs).user;
      assert.equal(userOf('postgres://localhost/test'), login);
      assert.equal(userOf('postgres:///test?host=/var/run/postgresql'), login);
      assert.equal(userOf('socket:/var/run/postgresql?db=test'), login);
      assert.equal(userOf('/var/run/postgresql test'), login);
      assert.equal(userOf('postgres://app@/test?host=/var/run/postgresql'), 'app');
      assert.equal(userOf('postgres:///test?host=/var/run/postgresql&user=app'), 'app');
      assert.equal(params('postgres:///test?host=/var/run/postgresql').host, '/var/run/postgresql');
      // A fragment, which pg ignores, stays out of the parameters ferry adds to.
      assert.equal(params('postgres:///test?host=/var/run/postgresql#frag').host, '/var/run/postgresql');
      assert.equal(userOf('socket:/var/run/postgresql?db=test#frag'), login);
      assert.equal((params('socket:/var/run/postgresql?db=test#frag') as unknown as { database: string }).database, 'test');
      assert.equal(userOf('\npostgres://localhost/test'), login);
      // pg reads no keyword/value string: it would look for database "host=..." on host "base".
      assert.throws(() => poolConfig(pg, 'host=127.0.0.1 user=app dbname=test', 1), InvalidArgumentError);
      // Nor a URL it cannot parse (a raw '?' in the password): refused once, not retried as a transient connection error.
      assert.throws(() => poolConfig(pg, 'postgres://app:pa?ss@127.0.0.1/test', 1), InvalidArgumentError);
      process.env.PGUSER = 'app';
      assert.equal(fallbackUser(pg, 'postgres://localhost/test'), undefined);
      delete process.env.PGUSER;
      (pg.defaults as { user?: string }).user = 'app';
      assert.equal(fallbackUser(pg, 'postgres://localhost/test'), undefined);
    } finally {
      if (saved.PGUSER === undefined) delete process.env.PGUSER;
      else process.env.PGUSER = saved.PGUSER;
      (pg.defaults as { user?: string }).user = saved.user;
    }
  });
});
