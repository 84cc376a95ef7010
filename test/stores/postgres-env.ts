/**
 * The PostgreSQL the tests use: FERRY_TEST_POSTGRES_URL, by default
 * postgres://localhost/test. Each harness gets a schema of its own, dropped
 * in `cleanup`. When the server cannot be reached the Postgres suites are
 * skipped with one line saying why; under CI=true that is a failure instead,
 * so a broken service never passes as a green run.
 */
import pg from 'pg';
import { poolConfig } from '../../src/queue/stores/postgres/connection.js';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import type { Store } from '../../src/queue/types.js';
import type { StoreFactory, StoreHarness } from './factories.js';

export const POSTGRES_URL = process.env.FERRY_TEST_POSTGRES_URL || 'postgres://localhost/test';
/**
 * POSTGRES_URL for `pg` used directly: naming the login name when neither it,
 * PGUSER nor USER names a user, as ferry's own pools do (pg alone reads only
 * $USER, which some CI shells leave unset). The stores get POSTGRES_URL itself.
 */
export const POSTGRES_DIRECT_URL = poolConfig(pg, POSTGRES_URL, 1).connectionString!;

async function reachable(): Promise<string | undefined> {
  const c = new pg.Client({ connectionString: POSTGRES_DIRECT_URL, connectionTimeoutMillis: 3000 });
  c.on('error', () => undefined);
  try {
    await c.connect();
    await c.query('SELECT 1');
    return undefined;
  } catch (err) {
    return `PostgreSQL at ${POSTGRES_URL} is unreachable (${(err as Error).message || (err as { code?: string }).code}); set FERRY_TEST_POSTGRES_URL`;
  } finally {
    await c.end().catch(() => undefined);
  }
}

const unreachable = await reachable();
if (unreachable && process.env.CI === 'true') throw new Error(`CI=true: ${unreachable}`);
/** Why the Postgres tests cannot run here, or undefined when they can. */
export const POSTGRES_SKIP = unreachable ? `skipped: ${unreachable}` : undefined;

/** Statements against the test server outside any store (schema drops, inspection). */
export const adminPool = new pg.Pool({ connectionString: POSTGRES_DIRECT_URL, max: 2, allowExitOnIdle: true });
adminPool.on('error', () => undefined);

let counter = 0;
/** A schema name no other test file or run uses at the same time. */
export function testSchema(tag = 't'): string {
  return `ferry_${tag}_${process.pid}_${++counter}_${Math.random().toString(36).slice(2, 8)}`;
}

/** The columns of `table`'s primary key in `schema`, in key order. */
export async function primaryKeyOf(schema: string, table: string): Promise<string[]> {
  const res = await adminPool.query<{ a: string }>(
    `SELECT a.attname AS a FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
     CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
     WHERE n.nspname = $1 AND c.relname = $2 AND i.indisprimary ORDER BY k.ord`,
    [schema, table],
  );
  return res.rows.map((r) => r.a);
}

export async function dropSchema(schema: string): Promise<void> {
  await adminPool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
}

export const postgresFactory: StoreFactory = {
  name: 'postgres',
  ...(POSTGRES_SKIP ? { skip: POSTGRES_SKIP } : {}),
  async create(): Promise<StoreHarness> {
    const schema = testSchema();
    const opened: Store[] = [];
    return {
      async open() {
        // A small pool per handle: each handle stands for another instance.
        const s = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 4 });
        opened.push(s);
        return s;
      },
      async cleanup() {
        for (const s of opened) await s.close().catch(() => undefined);
        await dropSchema(schema);
      },
    };
  },
};
