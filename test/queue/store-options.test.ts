/**
 * Each store's opener refuses options it does not know (a misspelt key was
 * ignored: `new MemoryStore({ backng })` made a store that silently shared
 * nothing, `poolsize` left the pool at its default) and bad values, with
 * `InvalidArgumentError` before anything is opened or created; and
 * `createStoreQueue` refuses something that is not a store.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { InvalidArgumentError } from '../../src/errors.js';
import { createStoreQueue } from '../../src/queue/engine.js';
import { ClickHouseStore } from '../../src/queue/stores/clickhouse/store.js';
import { MemoryBacking, MemoryStore } from '../../src/queue/stores/memory.js';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { SqliteStore } from '../../src/queue/stores/sqlite/store.js';

const dir = mkdtempSync(join(tmpdir(), 'ferry-store-options-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const refused = (message: RegExp) => (e: unknown) => e instanceof InvalidArgumentError && message.test(e.message);

test('memory store: an unknown key, or a backing that is not a MemoryBacking', () => {
  assert.throws(() => new MemoryStore({ backng: new MemoryBacking() } as never), refused(/unknown memory store option "backng" \(known: backing\)/));
  assert.throws(() => new MemoryStore({ backing: {} } as never), refused(/backing must be a MemoryBacking/));
  assert.throws(() => new MemoryStore(null as never), refused(/memory store options must be an object, got null/));
  const shared = new MemoryBacking();
  assert.equal(new MemoryStore({ backing: shared }).backing, shared);
});

test('sqlite store: an unknown key, a synchronous it does not know, a bad busyTimeoutMs; no file is made', async () => {
  const path = join(dir, 'q.db');
  const bad: Array<[Record<string, unknown>, RegExp]> = [
    [{ busyTimeout: 60_000 }, /unknown sqlite store option "busyTimeout"/],
    [{ synchronous: 'NORMAL' }, /synchronous must be 'full' or 'normal', got "NORMAL"/],
    [{ synchronous: 'off' }, /synchronous must be/],
    [{ busyTimeoutMs: -5 }, /busyTimeoutMs must be an integer from 0 to 2147483647, got -5/],
    [{ busyTimeoutMs: 'x' }, /busyTimeoutMs must be/],
    [{ busyTimeoutMs: 1.5 }, /busyTimeoutMs must be/],
  ];
  for (const [opts, message] of bad) await assert.rejects(SqliteStore.open({ path, ...opts } as never), refused(message), JSON.stringify(opts));
  assert.equal(existsSync(path), false, 'nothing was created');
  const s = await SqliteStore.open({ path, synchronous: 'normal', busyTimeoutMs: 0 });
  await s.close();
});

test('postgres and clickhouse stores: an unknown key is refused before anything connects', async () => {
  // Unreachable addresses: the check must come before any connection is tried.
  await assert.rejects(PostgresStore.open({ connectionString: 'postgres://nobody@127.0.0.1:1/none', poolsize: 2 } as never), refused(/unknown postgres store option "poolsize"/));
  await assert.rejects(PostgresStore.open(null as never), refused(/postgres store options must be an object/));
  await assert.rejects(ClickHouseStore.open({ url: 'http://127.0.0.1:1', databse: 'x' } as never), refused(/unknown clickhouse store option "databse"/));
  // Values: a URL the driver cannot read, credentials that are not strings, settings a borrowed client would ignore, a pool that is not one.
  await assert.rejects(ClickHouseStore.open({ url: 'not a url' }), refused(/clickhouse store: .*URL/i));
  await assert.rejects(ClickHouseStore.open({ url: 'http://127.0.0.1:1', username: 42 } as never), refused(/username must be a string/));
  const client = { query() {}, command() {}, close() {} } as never;
  await assert.rejects(ClickHouseStore.open({ client, username: 'u', requestTimeoutMs: 5 }), refused(/username, requestTimeoutMs apply only with url/));
  await assert.rejects(PostgresStore.open({ pool: {} } as never), refused(/pool must be a pg\.Pool/));
  await assert.rejects(PostgresStore.open({ pool: { connect() {} }, connectionString: 42 } as never), refused(/connectionString must be a string/));
});

test('createStoreQueue: something that is not a store', () => {
  assert.throws(() => createStoreQueue(null as never), refused(/createStoreQueue needs a Store: null lacks ensureGroup, append, claim/));
  assert.throws(() => createStoreQueue({ append() {} } as never), refused(/an object lacks ensureGroup, claim, ack/));
});
