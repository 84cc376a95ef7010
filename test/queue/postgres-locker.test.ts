/**
 * `PostgresLocker` beyond the SPI's shared tests (lockers.test.ts): fences
 * in grant order under contention (a release that deleted the row let a
 * waiter's insert, its fence drawn before it waited, land after a larger
 * one: 5 inversions in 540 grants); keys of any length; an abort while the
 * call waits for a pool connection; and a locker and a store opening one
 * fresh schema at once (each ran CREATE SCHEMA under its own lock, and one
 * failed on pg_namespace's unique index every time).
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { ClosedError, InvalidArgumentError, LockedError } from '../../src/errors.js';
import { PostgresLocker } from '../../src/queue/lockers/postgres.js';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { orHang, sleep } from '../stores/helpers.js';
import { POSTGRES_DIRECT_URL, POSTGRES_SKIP, POSTGRES_URL, dropSchema, testSchema } from '../stores/postgres-env.js';

describe('postgres locker', { skip: POSTGRES_SKIP }, () => {
  const schemas: string[] = [];
  const closers: Array<() => Promise<unknown>> = [];
  after(async () => {
    for (const c of closers.reverse()) await c().catch(() => undefined);
    for (const s of schemas) await dropSchema(s);
  });
  const fresh = () => {
    const s = testSchema('lock');
    schemas.push(s);
    return s;
  };
  const open = async (schema: string, prefix = 'p:') => {
    const l = await PostgresLocker.open({ connectionString: POSTGRES_URL, schema, prefix, poolSize: 4 });
    closers.push(() => l.close());
    return l;
  };

  it('fences grow in grant order while many callers take and give back one key', async () => {
    const schema = fresh();
    const lockers = await Promise.all(Array.from({ length: 6 }, () => open(schema)));
    const fences: number[] = [];
    let inside = 0;
    await Promise.all(
      lockers.flatMap((l) =>
        Array.from({ length: 3 }, async () => {
          for (let i = 0; i < 30; i++) {
            const lock = await l.acquire('k', 60_000);
            inside++;
            assert.equal(inside, 1, 'one holder at a time');
            fences.push(lock.fence);
            await sleep(i % 3);
            inside--;
            await lock.release();
          }
        }),
      ),
    );
    assert.equal(fences.length, 540);
    const inversions = fences.filter((f, i) => i > 0 && f <= fences[i - 1]!);
    assert.deepEqual(inversions, [], 'every grant has a larger fence than the one before it');
  });

  it('takes a key of any length', async () => {
    const l = await open(fresh());
    // Random, so the index cannot compress it under its 2,704-byte row limit.
    const key = randomBytes(2500).toString('hex');
    const lock = await l.acquire(key, 10_000);
    assert.equal(lock.key, key);
    await lock.release();
    await (await l.acquire(key, 10_000)).release();
  });

  it('an abort while the call waits for a pool connection rejects with LockedError; a grant after it is given back', async () => {
    const schema = fresh();
    await open(schema); // makes the table
    const pool = new pg.Pool({ connectionString: POSTGRES_DIRECT_URL, max: 1 });
    closers.push(() => pool.end());
    const l = await PostgresLocker.open({ pool, schema, prefix: 'p:' });
    const busy = await pool.connect(); // the pool's one connection
    try {
      const ctl = new AbortController();
      const waiting = l.acquire('k', 60_000, { signal: ctl.signal });
      ctl.abort(new Error('gave up'));
      await assert.rejects(orHang(waiting, 'the aborted acquire'), LockedError);
    } finally {
      busy.release();
    }
    // The statement ran once the connection was free; its grant, if any, was given back.
    const other = await open(schema);
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(new Error('still held')), 30_000);
    try {
      await (await other.acquire('k', 1000, { signal: ctl.signal })).release();
    } finally {
      clearTimeout(timer);
    }
  });

  it('a locker and a store opening one fresh schema at once both open', async () => {
    for (let round = 0; round < 3; round++) {
      const schema = fresh();
      const [locker, store] = await Promise.allSettled([
        PostgresLocker.open({ connectionString: POSTGRES_URL, schema }),
        PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 1 }),
      ]);
      if (locker.status === 'fulfilled') closers.push(() => locker.value.close());
      if (store.status === 'fulfilled') closers.push(() => store.value.close());
      assert.deepEqual([locker.status, store.status], ['fulfilled', 'fulfilled'], String((locker as PromiseRejectedResult).reason ?? (store as PromiseRejectedResult).reason));
    }
  });
  /** Acquires `key` on `l`, failing (not hanging) if it is not granted within 30 s: a lease left behind would hold it for its whole TTL. */
  const takeSoon = async (l: PostgresLocker, key: string) => {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(new Error('still held')), 30_000);
    try {
      return await l.acquire(key, 1000, { signal: ctl.signal });
    } finally {
      clearTimeout(timer);
    }
  };

  it('close gives back the leases it holds, and those of grants that land while it waits; those acquires reject with ClosedError', async () => {
    const schema = fresh();
    const a = await PostgresLocker.open({ connectionString: POSTGRES_URL, schema, prefix: 'p:', poolSize: 1 });
    closers.push(() => a.close());
    const b = await open(schema);
    const held = await a.acquire('held', 600_000);
    await (await a.acquire('k', 1000)).release(); // k's row exists now
    // A side session holds k's row: a's take of k waits on the server, and a take of k2 waits for a's one connection.
    const side = await new pg.Client({ connectionString: POSTGRES_DIRECT_URL });
    await side.connect();
    closers.push(() => side.end());
    await side.query('BEGIN');
    await side.query(`SELECT 1 FROM "${schema}".locks FOR UPDATE`);
    const onServer = a.acquire('k', 600_000).then((l) => l, (e: unknown) => e);
    const queued = a.acquire('k2', 600_000).then((l) => l, (e: unknown) => e);
    await sleep(50);
    const closing = a.close();
    await side.query('COMMIT');
    await orHang(closing, 'close');
    for (const [name, got] of [['on the server', await onServer], ['queued for a connection', await queued]] as const) {
      assert.ok(got instanceof ClosedError, `${name}: ClosedError, got ${String(got)}`);
    }
    assert.equal(held.key, 'held');
    // Nothing is left holding a key: each is free for another locker at once, not after its 600 s TTL.
    for (const key of ['held', 'k', 'k2']) await (await takeSoon(b, key)).release();
  });

  it('keys that differ only in unpaired surrogates are different keys', async () => {
    const l = await open(fresh());
    const held = await Promise.all(['\uD800', '\uDC00', '\uFFFD', 'x\uDFFF'].map((k) => l.acquire(k, 600_000)));
    assert.equal(held.length, 4);
    await (await takeSoon(l, 'x\uD83D')).release();
    await Promise.all(held.map((h) => h.release()));
  });

  it('refuses a prefix with NUL and a bad schema name, naming the locker', async () => {
    await assert.rejects(PostgresLocker.open({ connectionString: POSTGRES_URL, prefix: 'a\0b' }), (e) => e instanceof InvalidArgumentError && /postgres locker: prefix/.test(e.message));
    await assert.rejects(PostgresLocker.open({ connectionString: POSTGRES_URL, schema: 'Bad-Name' }), (e) => e instanceof InvalidArgumentError && /^postgres locker: schema/.test(e.message));
  });
});
