/**
 * A Postgres connection the server ends (a fast shutdown, a failover,
 * `pg_terminate_backend`) emits 'error' on its client, and an 'error' with
 * no listener ends the process. Two moments had none:
 * - the store's connection failing in the very read that made it ready,
 *   after the pool handed it out and before the store's own listener was on
 *   it (injected right after a client's first ReadyForQuery, the moment a
 *   fresh helper hit with backends terminated every 2 ms);
 * - the locker's connection, checked out for as long as it holds a lock.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { IOError } from '../../src/errors.js';
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

describe('postgres locker, its connection ended while it holds a lock', { skip: POSTGRES_SKIP }, () => {
  it('does not crash the process; release reports the lost connection, and the key can be taken again', async () => {
    const uncaught: unknown[] = [];
    const onUncaught = (err: unknown) => void uncaught.push(err);
    process.on('uncaughtException', onUncaught);
    const prefix = `lost-${process.pid}-`;
    let locker: PostgresLocker | undefined;
    try {
      locker = await PostgresLocker.open({ connectionString: POSTGRES_URL, prefix, poolSize: 2 });
      const held = await locker.acquire('k', 60_000);
      // The session holding this key's advisory lock (a bigint key: class and object IDs are its two halves).
      const { rows } = await adminPool.query<{ pid: number }>(
        `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted
           AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0)`,
        [`${prefix}k`],
      );
      assert.equal(rows.length, 1);
      await adminPool.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
      // The client hears of it when the server's goodbye arrives: wait for the session to be gone.
      for (let i = 0; i < 500; i++) {
        const left = await adminPool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [rows[0]!.pid]);
        if (left.rowCount === 0) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      await assert.rejects(held.release(), (err) => err instanceof IOError);
      const again = await locker.acquire('k', 60_000);
      await again.release();
      assert.deepEqual(uncaught, []);
    } finally {
      process.off('uncaughtException', onUncaught);
      await locker?.close();
    }
  });
});
