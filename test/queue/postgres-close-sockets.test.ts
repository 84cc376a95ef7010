/**
 * Postgres store calls given up at close's deadline, while their statements
 * still wait on the server (on a lock another session holds), leave no
 * socket of the queue open: pg's polite end would wait for a server that
 * reads nothing until the statement ends, and keep the process alive.
 */
import assert from 'node:assert/strict';
import { Socket } from 'node:net';
import { describe, it } from 'node:test';
import pg from 'pg';
import { ClosedError } from '../../src/errors.js';
import { PostgresStore, createStoreQueue } from '../../src/queue/index.js';
import type { Queue } from '../../src/queue/types.js';
import { blockedBy } from '../stores/postgres-hold.js';
import { POSTGRES_DIRECT_URL, POSTGRES_SKIP, dropSchema, testSchema } from '../stores/postgres-env.js';
import { waitFor } from '../stores/helpers.js';

/** The open sockets of this process to the test server's port. */
function serverSockets(port: number): Set<Socket> {
  const handles = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles();
  return new Set(handles.filter((h): h is Socket => h instanceof Socket && !h.destroyed && h.remotePort === port));
}

describe('postgres close while a statement waits on a lock', { skip: POSTGRES_SKIP }, () => {
  it('close({ timeoutMs }) returns, the waiting publish rejects with ClosedError, and none of the queue\'s sockets stays open', { timeout: 120_000 }, async () => {
    const schema = testSchema('closesock');
    const holder = new pg.Client({ connectionString: POSTGRES_DIRECT_URL });
    await holder.connect();
    const port = (holder as unknown as { connection: { stream: Socket } }).connection.stream.remotePort!;
    let q: Queue | null = null;
    try {
      const holderPid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await blockedBy(holderPid); // the admin pool's socket opens now, before the queue's
      const before = serverSockets(port);
      const queueSockets = () => [...serverSockets(port)].filter((s) => !before.has(s));
      // No statement or query timeout: nothing but close ends a waiting statement's connection.
      const store = await PostgresStore.open({ connectionString: POSTGRES_DIRECT_URL, schema, statementTimeoutMs: 0, queryTimeoutMs: 0 });
      q = createStoreQueue(store);
      // A consumer at work (claims, acks, renewals: calls the engine can abort) ...
      await q.subscribe('t', 'g', async () => undefined, { leaseDurationMs: 2000, pollIntervalMs: 50 });
      await q.publish(...Array.from({ length: 50 }, (_, i) => ({ topic: 't', payload: new Uint8Array([i]) })));
      await holder.query('BEGIN');
      await holder.query(`LOCK TABLE "${schema}".deliveries IN ACCESS EXCLUSIVE MODE`);
      // ... and a publish and a stats call, which run on the store without a signal.
      const publish = q.publish({ topic: 't', payload: new Uint8Array([99]) });
      const stats = q.stats('t', 'g');
      for (const p of [publish, stats]) p.catch(() => undefined);
      await waitFor(async () => (await blockedBy(holderPid)).length >= 2, 0, 'the publish and the stats waiting on the lock');
      assert.ok(queueSockets().length > 0, 'the waiting calls hold sockets of the queue');
      await q.close({ timeoutMs: 200 });
      await assert.rejects(publish, ClosedError);
      await assert.rejects(stats, ClosedError);
      // The statements still wait on the server (the lock is held), yet the queue's sockets are gone.
      assert.ok((await blockedBy(holderPid)).length > 0, 'the abandoned statements still wait on the server');
      await waitFor(() => queueSockets().length === 0, 0, 'the queue\'s sockets to close');
    } finally {
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
      await q?.close({ timeoutMs: 1000 }).catch(() => undefined);
      await dropSchema(schema);
    }
  });
});
