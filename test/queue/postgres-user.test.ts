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
import { fallbackUser } from '../../src/queue/stores/postgres/connection.js';
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
  it('names the login name only when the URL, PGUSER and USER name nobody', () => {
    const saved = { PGUSER: process.env.PGUSER, user: (pg.defaults as { user?: string }).user };
    try {
      delete process.env.PGUSER;
      (pg.defaults as { user?: string }).user = undefined;
      assert.equal(fallbackUser(pg, 'postgres://localhost/test'), userInfo().username);
      assert.equal(fallbackUser(pg, 'postgres://app@localhost/test'), undefined);
      assert.equal(fallbackUser(pg, 'postgres://localhost/test?user=app'), undefined);
      assert.equal(fallbackUser(pg, 'host=/tmp user=app dbname=test'), undefined);
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
