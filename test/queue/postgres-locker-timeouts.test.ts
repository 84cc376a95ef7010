/**
 * No `PostgresLocker` call waits forever. Through a TCP proxy that stops
 * forwarding (a frozen network: no error, no answer), `acquire`, `release`
 * and a new connection reject with a transient `IOError` once their timeout
 * passes, and `close()` settles, where before all three waited for good: the
 * locker's own pool had no timeouts. A borrowed pool gets the answer timeout
 * too (it is set per statement). After the thaw the lease taken before the
 * freeze is still held, and is given back.
 */
import assert from 'node:assert/strict';
import { after, afterEach, describe, it } from 'node:test';
import pg from 'pg';
import { ClosedError, InvalidArgumentError, IOError } from '../../src/errors.js';
import { PostgresLocker } from '../../src/queue/lockers/postgres.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { isTransientIOError, leaseOutlivesFreeze, within } from './locker-freeze.js';
import { POSTGRES_DIRECT_URL, POSTGRES_SKIP, POSTGRES_URL, dropSchema, testSchema } from '../stores/postgres-env.js';

describe('postgres locker on a frozen connection', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('lockfreeze');
  const cleanups: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  });
  after(() => dropSchema(schema));

  const target = new URL(POSTGRES_URL);
  const port = Number(target.port || 5432);
  const host = target.hostname === 'localhost' ? '127.0.0.1' : target.hostname;
  async function proxy(): Promise<TcpProxy> {
    const p = await TcpProxy.start(port, host);
    cleanups.push(() => p.close());
    return p;
  }

  it('acquire, release and close settle on their own pool, with transient IOErrors; the lease outlives the freeze', { timeout: 600_000 }, async () => {
    const p = await proxy();
    const locker = await PostgresLocker.open({ connectionString: p.url(POSTGRES_URL), schema, poolSize: 2, connectTimeoutMs: 1000, statementTimeoutMs: 500, queryTimeoutMs: 1000 });
    // Thawed first, so this close never waits on the freeze.
    cleanups.push(async () => (p.thaw(), await locker.close()));
    const direct = await PostgresLocker.open({ connectionString: POSTGRES_URL, schema });
    cleanups.push(() => direct.close());

    await leaseOutlivesFreeze(p, locker, direct);
  });

  it('close settles while a statement is frozen, on its own pool', { timeout: 600_000 }, async () => {
    const p = await proxy();
    const locker = await PostgresLocker.open({ connectionString: p.url(POSTGRES_URL), schema, poolSize: 1, connectTimeoutMs: 1000, queryTimeoutMs: 1000 });
    cleanups.push(async () => (p.thaw(), await locker.close()));
    p.freeze();
    const acquiring = locker.acquire('k', 1000);
    acquiring.catch(() => undefined);
    await within(locker.close(), 'close');
    await assert.rejects(acquiring, (err: unknown) => err instanceof IOError || (err as { code?: string }).code === 'ERR_CLOSED');
  });

  it('a borrowed pool with no timeouts of its own: every call settles within queryTimeoutMs, waiting for a connection included, and close settles', { timeout: 600_000 }, async () => {
    const p = await proxy();
    // pg's defaults: no connection timeout. Once the first timeout drops the pool's connection, the next call waits for a new one.
    const pool = new pg.Pool({ connectionString: p.url(POSTGRES_DIRECT_URL), max: 1 });
    pool.on('error', () => undefined);
    cleanups.push(async () => (p.thaw(), await pool.end()));
    const locker = await PostgresLocker.open({ pool, schema, queryTimeoutMs: 1000 });
    cleanups.push(async () => (p.thaw(), await locker.close()));
    await (await locker.acquire('warm', 1000)).release();
    p.freeze();
    await within(assert.rejects(locker.acquire('k', 1000), isTransientIOError), 'acquire on the pooled connection');
    // Before, these waited for good for a connection the frozen network never gave.
    await within(assert.rejects(locker.acquire('k', 1000), isTransientIOError), 'acquire waiting for a new connection');
    await within(assert.rejects(Promise.all([locker.acquire('a', 1000), locker.acquire('b', 1000)]), isTransientIOError), 'two at once');
    await within(locker.close(), 'close');
  });

  it('open on a borrowed pool settles within queryTimeoutMs on a frozen network, waiting for a connection or an answer to its set-up', { timeout: 600_000 }, async () => {
    const p = await proxy();
    const pool = new pg.Pool({ connectionString: p.url(POSTGRES_DIRECT_URL), max: 1 });
    pool.on('error', () => undefined);
    cleanups.push(async () => (p.thaw(), await pool.end()));
    (await pool.connect()).release();
    p.freeze();
    // Before, this open waited for good: the set-up had no deadline on a borrowed pool.
    await within(assert.rejects(PostgresLocker.open({ pool, schema, queryTimeoutMs: 1000 }), isTransientIOError), 'open, set-up frozen');
    // Its connection is now stuck in the frozen set-up: the next open waits for a connection, and settles too.
    await within(assert.rejects(PostgresLocker.open({ pool, schema, queryTimeoutMs: 1000 }), isTransientIOError), 'open, waiting for a connection');
  });

  it('a grant whose answer never came is given back once the call times out, on its own pool and on a borrowed one', { timeout: 600_000 }, async () => {
    const direct = await PostgresLocker.open({ connectionString: POSTGRES_URL, schema });
    cleanups.push(() => direct.close());
    const pool = new pg.Pool({ connectionString: POSTGRES_DIRECT_URL, max: 2 });
    cleanups.push(() => pool.end());
    for (const borrowed of [false, true]) {
      const p = await proxy();
      const via = borrowed ? new pg.Pool({ connectionString: p.url(POSTGRES_DIRECT_URL), max: 2 }) : undefined;
      via?.on('error', () => undefined);
      if (via) cleanups.push(async () => (p.thaw(), await via.end()));
      const locker = await PostgresLocker.open(via ? { pool: via, schema, queryTimeoutMs: 1000 } : { connectionString: p.url(POSTGRES_URL), schema, queryTimeoutMs: 1000 });
      cleanups.push(async () => (p.thaw(), await locker.close()));
      await (await locker.acquire('warm', 1000)).release();
      const key = `late-${borrowed}`;
      // The take runs on the server and grants; only its answer is lost.
      p.freezeAnswers();
      await within(assert.rejects(locker.acquire(key, 600_000), isTransientIOError), 'acquire');
      p.thaw();
      // Before, the grant stood for its whole TTL (600 s here): no other holder could take the key.
      const next = await within(direct.acquire(key, 1000), `${key}: the key is free again`);
      await next.release();
      await locker.close();
    }
  });

  it('close rejects an acquire under way with ClosedError at once, on a borrowed pool with no free connection too', { timeout: 600_000 }, async () => {
    const pool = new pg.Pool({ connectionString: POSTGRES_DIRECT_URL, max: 1 });
    cleanups.push(() => pool.end());
    const locker = await PostgresLocker.open({ pool, schema });
    const busy = await pool.connect();
    cleanups.push(async () => busy.release());
    const waiting = locker.acquire('k', 1000);
    waiting.catch(() => undefined);
    // Before, close waited for the acquire's statement (up to queryTimeoutMs, 15 s here), and the acquire then failed with an IOError.
    const closed = locker.close();
    await assert.rejects(within(waiting, 'acquire'), ClosedError);
    await within(closed, 'close');
    busy.release();
    cleanups.pop();
    // The statement the pool ran later gave its grant back: the key is free.
    const other = await PostgresLocker.open({ connectionString: POSTGRES_URL, schema });
    cleanups.push(() => other.close());
    await (await within(other.acquire('k', 1000), 'the key is free')).release();
  });

  it('twenty acquires waiting on a held key: close settles every one with ClosedError by the time it resolves, with no listener-leak warning', { timeout: 600_000 }, async () => {
    const holder = await PostgresLocker.open({ connectionString: POSTGRES_URL, schema });
    cleanups.push(() => holder.close());
    const held = await holder.acquire('busy', 600_000);
    cleanups.push(() => held.release());
    const locker = await PostgresLocker.open({ connectionString: POSTGRES_URL, schema });
    cleanups.push(() => locker.close());
    const warnings: string[] = [];
    const onWarning = (w: Error) => void warnings.push(w.name);
    process.on('warning', onWarning);
    try {
      const settled: unknown[] = [];
      const waiting = Array.from({ length: 20 }, () => locker.acquire('busy', 1000).then((l) => l, (err: unknown) => void settled.push(err)));
      // Let every one of them try and start waiting between tries.
      await new Promise((r) => setTimeout(r, 200));
      await within(locker.close(), 'close');
      // Before, an acquire sleeping between tries saw the close only at its next try, up to 50 ms after close resolved.
      assert.equal(settled.length, 20, 'every acquire settled before close resolved');
      for (const err of settled) assert.ok(err instanceof ClosedError, String(err));
      await Promise.all(waiting);
      await new Promise((r) => setImmediate(r));
      assert.deepEqual(warnings.filter((w) => w === 'MaxListenersExceededWarning'), []);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('what a retry cannot mend is not transient: a missing database, a missing table', { timeout: 600_000 }, async () => {
    const missing = new URL(POSTGRES_URL);
    missing.pathname = '/ferry_no_such_database';
    await assert.rejects(PostgresLocker.open({ connectionString: missing.toString(), schema }), (err: unknown) => err instanceof IOError && err.transient === false && /3D000/.test(err.message));
    const dropped = testSchema('lockdrop');
    const locker = await PostgresLocker.open({ connectionString: POSTGRES_URL, schema: dropped });
    cleanups.push(async () => (await locker.close(), await dropSchema(dropped)));
    const admin = new pg.Client({ connectionString: POSTGRES_DIRECT_URL });
    await admin.connect();
    try {
      await admin.query(`DROP TABLE "${dropped}".locks`);
    } finally {
      await admin.end();
    }
    await assert.rejects(locker.acquire('k', 1000), (err: unknown) => err instanceof IOError && err.transient === false && /42P01/.test(err.message));
  });

  it('refuses bad timeouts and unknown options', async () => {
    for (const bad of [{ queryTimeoutMs: -1 }, { connectTimeoutMs: 0 }, { statementTimeoutMs: 1.5 }, { queryTimeoutMs: '10' }]) {
      await assert.rejects(PostgresLocker.open({ connectionString: POSTGRES_URL, schema, ...(bad as object) }), InvalidArgumentError, JSON.stringify(bad));
    }
    await assert.rejects(PostgresLocker.open({ connectionString: POSTGRES_URL, schema, poolsize: 2 } as never), /unknown postgres locker option "poolsize"/);
  });
});
