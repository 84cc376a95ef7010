/**
 * A Postgres connection the server ends (a fast shutdown, a failover,
 * `pg_terminate_backend`) emits 'error' on its client, and an 'error' with
 * no listener ends the process. Two moments had none:
 * - the store's connection failing in the very read that made it ready,
 *   after the pool handed it out and before the store's own listener was on
 *   it (injected right after a client's first ReadyForQuery, the moment a
 *   fresh helper hit with backends terminated every 2 ms);
 * - the locker's connection, once checked out for as long as it held a
 *   lock; ending it then freed the lock on the server, while the holder
 *   still counted on its TTL (two holders at once). The locker now keeps a
 *   lease row and no connection.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { PostgresLocker } from '../../src/queue/lockers/postgres.js';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { claimReq, msg } from '../stores/helpers.js';
import { POSTGRES_SKIP, POSTGRES_URL, adminPool, dropSchema, testSchema } from '../stores/postgres-env.js';

type ReadyHandler = (this: pg.Client, msg: unknown) => void;

describe('postgres store, a client failing as it becomes ready', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('clienterr');
  after(() => dropSchema(schema));

  it('does not crash the process; the statement it was wanted for still completes on another connection', async () => {
    const proto = pg.Client.prototype as unknown as { _handleReadyForQuery: ReadyHandler };
    const original = proto._handleReadyForQuery;
    let injected = 0;
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => void uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    let setup: PostgresStore | undefined;
    try {
      setup = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 2 });
      await setup.ensureGroup('t', 'g', 'latest');
      await setup.close();
      setup = undefined;
      // New clients from here on: each fails once, right after its first ReadyForQuery, in the same turn.
      const seen = new WeakSet<object>();
      proto._handleReadyForQuery = function (this: pg.Client, m: unknown) {
        original.call(this, m);
        if (seen.has(this) || injected >= 4) return;
        seen.add(this);
        injected++;
        this.emit('error', new Error('terminating connection due to administrator command (injected)'));
      };
      const again = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 2 });
      try {
        await again.append([msg('t', { id: 'a' })]);
        const got = await again.claim(claimReq('t', 'g'));
        assert.deepEqual(got.map((c) => c.message.id), ['a']);
      } finally {
        proto._handleReadyForQuery = original;
        await again.close();
      }
      assert.ok(injected >= 1, 'an error was injected');
      assert.deepEqual(uncaught, []);
    } finally {
      proto._handleReadyForQuery = original;
      process.off('uncaughtException', onUncaught);
      await setup?.close().catch(() => undefined);
    }
  });
});

describe('postgres locker, its connections ended while it holds a lock', { skip: POSTGRES_SKIP }, () => {
  it('does not crash the process, and does not free the lock: another locker waits for the release (two holders at once before)', async () => {
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => void uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    const prefix = `lost-${process.pid}-`;
    const appName = `ferry-lost-${process.pid}`;
    let a: PostgresLocker | undefined;
    let b: PostgresLocker | undefined;
    try {
      const url = new URL(POSTGRES_URL);
      url.searchParams.set('application_name', appName);
      a = await PostgresLocker.open({ connectionString: url.toString(), prefix, poolSize: 2 });
      b = await PostgresLocker.open({ connectionString: POSTGRES_URL, prefix, poolSize: 2 });
      const held = await a.acquire('k', 600_000);
      // End every session of the holder's locker, as a failover or an administrator would.
      const ended = await adminPool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, [appName]);
      assert.ok((ended.rowCount ?? 0) >= 1, 'the holder had a session to end');
      for (let i = 0; i < 500; i++) {
        const left = await adminPool.query('SELECT 1 FROM pg_stat_activity WHERE application_name = $1', [appName]);
        if (left.rowCount === 0) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      // The other locker waits: the lease stands while its holder counts on it.
      const ctl = new AbortController();
      const waiting = b.acquire('k', 10_000, { signal: ctl.signal });
      let granted = false;
      void waiting.then(() => (granted = true), () => undefined);
      for (let i = 0; i < 20; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(granted, false, 'granted while the first holder still held the key');
      // The holder's release (on a new connection) lets the waiter in, with a larger fence.
      await held.release();
      const next = await waiting;
      assert.ok(next.fence > held.fence);
      await next.release();
      assert.deepEqual(uncaught, []);
    } finally {
      process.off('uncaughtException', onUncaught);
      await a?.close();
      await b?.close();
    }
  });
});
