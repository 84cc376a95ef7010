/**
 * PostgresStore.close() beside other calls: two closes at once, and a call
 * that ends while close's grace still runs. The calls wait on a lock another
 * session holds, so the test, not timing, decides when they end.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, connect, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import pg from 'pg';
import { ClosedError, InvalidArgumentError } from '../../src/errors.js';
import { PostgresStore } from '../../src/queue/index.js';
import { blockedBy } from '../stores/postgres-hold.js';
import { HANG_MS, waitFor } from '../stores/helpers.js';
import { POSTGRES_DIRECT_URL, POSTGRES_SKIP, dropSchema, testSchema } from '../stores/postgres-env.js';

const message = () => ({ id: randomUUID(), topic: 't', payload: new Uint8Array([7]), publishedAt: new Date() });

/**
 * Opens a store on a fresh schema, locks its messages table from another
 * session and starts an append that waits on the lock; hands both to `fn`
 * and cleans up on every path.
 */
async function withBlockedAppend(tag: string, closeGraceMs: number, poolSize: number, fn: (ctx: { store: PostgresStore; append: Promise<void>; id: string; unlock: () => Promise<unknown>; schema: string }) => Promise<void>): Promise<void> {
  const schema = testSchema(tag);
  const holder = new pg.Client({ connectionString: POSTGRES_DIRECT_URL });
  await holder.connect();
  let store: PostgresStore | undefined;
  try {
    store = await PostgresStore.open({ connectionString: POSTGRES_DIRECT_URL, schema, statementTimeoutMs: 0, queryTimeoutMs: 0, closeGraceMs, poolSize });
    const holderPid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    await holder.query('BEGIN');
    await holder.query(`LOCK TABLE "${schema}".messages IN ACCESS EXCLUSIVE MODE`);
    const m = message();
    const append = store.append([m]);
    append.catch(() => undefined);
    await waitFor(async () => (await blockedBy(holderPid)).length >= 1, 0, 'the append waiting on the lock');
    await fn({ store, append, id: m.id, unlock: () => holder.query('ROLLBACK'), schema });
  } finally {
    await holder.query('ROLLBACK').catch(() => undefined);
    await holder.end();
    await store?.close();
    await dropSchema(schema);
  }
}

describe('PostgresStore.close beside other calls', { skip: POSTGRES_SKIP }, () => {
  it('closeGraceMs must be an integer of 0 or more', async () => {
    for (const closeGraceMs of [-1, 1.5, '10', Number.NaN]) {
      await assert.rejects(PostgresStore.open({ connectionString: POSTGRES_DIRECT_URL, closeGraceMs: closeGraceMs as number }), (err: Error) => err instanceof InvalidArgumentError && /closeGraceMs must be an integer from 0 to/.test(err.message));
    }
  });

  it('two closes at once: neither resolves before the other, the running call is cut with ClosedError, later calls are refused', { timeout: HANG_MS }, async () => {
    await withBlockedAppend('close2', 0, 10, async ({ store, append }) => {
      const order: string[] = [];
      const closes = [store.close().then(() => order.push('first')), store.close().then(() => order.push('second'))];
      await Promise.all(closes);
      // The second call returns the first call's promise: it cannot resolve before the sockets are cut.
      assert.deepEqual(order, ['first', 'second']);
      await assert.rejects(append, ClosedError);
      await assert.rejects(store.append([message()]), ClosedError);
      await assert.rejects(store.stats('t', 'g'), ClosedError);
      // A third close after the fact resolves too.
      await store.close();
    });
  });

  it('calls waiting for a pooled connection are cut by close too, not left to the connect timeout', { timeout: HANG_MS }, async () => {
    // One connection, held by the append that waits on the lock: the stats calls wait for it in the pool.
    await withBlockedAppend('closewait', 0, 1, async ({ store, append }) => {
      const settled: boolean[] = [];
      const waiting = Array.from({ length: 5 }, (_, i) => {
        settled[i] = false;
        const p = store.stats('t', 'g');
        p.then(() => (settled[i] = true), () => (settled[i] = true));
        return p;
      });
      await store.close();
      // Every call had ended when close resolved (the pool's connect timeout is 10 s; the test's deadline only catches a hang).
      assert.deepEqual(settled, [true, true, true, true, true]);
      for (const p of waiting) await assert.rejects(p, ClosedError);
      await assert.rejects(append, ClosedError);
    });
  });

  it('a connection the pool is still opening does not hold close until connectTimeoutMs', { timeout: HANG_MS }, async () => {
    // A proxy to the server that forwards the connections made while the
    // store opens, then holds every later one unanswered: a server slow to accept.
    const target = new URL(POSTGRES_DIRECT_URL);
    const held: Socket[] = [];
    let hold = false;
    let forwarded = 0;
    const proxy = createServer((inbound) => {
      if (hold) {
        held.push(inbound);
        inbound.on('error', () => undefined);
        inbound.resume(); // read (and drop) what the client sends, so its end is seen
        return;
      }
      forwarded++;
      const outbound = connect(Number(target.port || 5432), target.hostname || '127.0.0.1');
      inbound.pipe(outbound).pipe(inbound);
      inbound.on('error', () => outbound.destroy());
      outbound.on('error', () => inbound.destroy());
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const via = new URL(POSTGRES_DIRECT_URL);
    via.hostname = '127.0.0.1';
    via.port = String((proxy.address() as { port: number }).port);
    const schema = testSchema('closeconn');
    const holder = new pg.Client({ connectionString: POSTGRES_DIRECT_URL });
    await holder.connect();
    let store: PostgresStore | undefined;
    try {
      // The connect timeout outlasts the test's deadline: only close can end the held connection.
      store = await PostgresStore.open({ connectionString: via.toString(), schema, poolSize: 4, statementTimeoutMs: 0, queryTimeoutMs: 0, connectTimeoutMs: HANG_MS * 2, closeGraceMs: 0 });
      hold = true;
      const open = forwarded; // the connections the open left in the pool
      assert.ok(open < 4, `the open used ${open} connections`);
      const holderPid = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await holder.query('BEGIN');
      await holder.query(`LOCK TABLE "${schema}".messages IN ACCESS EXCLUSIVE MODE`);
      // As many calls as the pool has open connections wait on the lock; the next waits for a new one the proxy holds.
      const appends = Array.from({ length: open }, () => store!.append([message()]));
      await waitFor(async () => (await blockedBy(holderPid)).length >= open, 0, 'the appends waiting on the lock');
      const stats = store.stats('t', 'g');
      for (const p of [...appends, stats]) p.catch(() => undefined);
      await waitFor(() => held.length === 1, 0, 'the pool opening another connection');
      const heldClosed = new Promise<void>((resolve) => held[0]!.on('close', () => resolve()));
      await store.close();
      for (const p of [...appends, stats]) await assert.rejects(p, ClosedError);
      await heldClosed;
    } finally {
      for (const s of held) s.destroy();
      await holder.query('ROLLBACK').catch(() => undefined);
      await holder.end();
      await store?.close();
      await new Promise((resolve) => proxy.close(resolve));
      await dropSchema(schema);
    }
  });

  it('a call that ends during the grace keeps its result, and close resolves after it', { timeout: HANG_MS }, async () => {
    // The grace outlasts the test's hang deadline: only the call's end lets close finish.
    await withBlockedAppend('closegrace', HANG_MS * 2, 10, async ({ store, append, id, unlock, schema }) => {
      const order: string[] = [];
      const closing = store.close().then(() => order.push('close'));
      const appended = append.then(() => order.push('append'));
      // Closing refuses new calls at once, while the running one still waits on the lock.
      await assert.rejects(store.stats('t', 'g'), ClosedError);
      assert.deepEqual(order, []);
      await unlock();
      await Promise.all([closing, appended]);
      assert.deepEqual(order, ['append', 'close']);
      // The append was stored, not cut.
      const reader = await PostgresStore.open({ connectionString: POSTGRES_DIRECT_URL, schema });
      try {
        const page = await reader.listMessages!('t', { limit: 10 });
        assert.deepEqual(page.messages.map((m) => m.id), [id]);
      } finally {
        await reader.close();
      }
    });
  });
});
