/**
 * A pooled connection that fails in the very read that made it ready (the
 * server ends the session as the connection comes up: a fast shutdown, a
 * failover, `pg_terminate_backend`) emits 'error' on its client after the
 * pool has handed it out and before the store's own listener is on it. An
 * 'error' with no listener crashes the process; the store's own pool gives
 * every client a listener when it connects. The failure is injected right
 * after a client's first ReadyForQuery, the moment a fresh helper hit with
 * backends terminated every 2 ms.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import pg from 'pg';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { claimReq, msg } from '../stores/helpers.js';
import { POSTGRES_SKIP, POSTGRES_URL, dropSchema, testSchema } from '../stores/postgres-env.js';

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
    const store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema, poolSize: 2 });
    try {
      await store.ensureGroup('t', 'g', 'latest');
      await store.close();
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
    }
  });
});
