/**
 * Building a queue from configuration (Bifrost's `NewQueue`, `Register`,
 * `Registered`). A config is JSON-shaped, `{ enabled, type, config }`; the
 * registered factory for `type` turns its `config` block into a `Queue`.
 * `memory`, `sqlite`, `postgres` and `clickhouse` are registered here; other packages add theirs with
 * `registerQueueType`.
 */
import { UnsupportedError, InvalidArgumentError } from '../errors.js';
import { createStoreQueue } from './engine.js';
import type { EngineConfig, ErrorReporter } from './options.js';
import { MemoryStore } from './stores/memory.js';
import type { Queue } from './types.js';

/** Selects and configures a queue implementation. Bifrost's `Config`. */
export interface QueueConfig {
  /** A disabled (or absent) config builds no queue. */
  enabled?: boolean;
  /** A registered type: `memory`, `sqlite`, or one added with `registerQueueType`. */
  type: string;
  /** The type's own settings, as parsed JSON. `memory`: the engine fields. `sqlite`: `path` plus the engine fields. `postgres`: `connectionString` (or a `pg.Pool` as `deps.pool`, never closed by the queue) and `schema`, plus the engine fields. `clickhouse`: `url`, optional `username`, `password`, `database`, plus the engine fields, with the shared locker as `deps.locker` (required to consume). */
  config?: unknown;
}

/** Shared resources a factory may build on; a queue never closes them. Bifrost's `Dependencies`. */
export interface QueueDependencies {
  /** Where the engine reports errors it handled. Default `console.warn`. */
  onError?: ErrorReporter;
  /** `postgres`: a `pg.Pool` to use instead of a `connectionString`; the queue never ends it. */
  pool?: unknown;
  /** `clickhouse`: the `DistributedLocker` every instance shares; without it the queue can publish but `subscribe` throws `NoLockerError`. Never closed by the queue. */
  locker?: unknown;
  /** Anything a registered type needs (a connection pool, a locker…), by name. */
  [name: string]: unknown;
}

/** Builds a queue from its type's `config` block. Bifrost's `Factory`. */
export type QueueFactory = (config: unknown, deps: QueueDependencies) => Promise<Queue> | Queue;

const factories = new Map<string, QueueFactory>();

/**
 * Makes a queue implementation available to `createQueue` under `type`.
 * Throws `InvalidArgumentError` on an empty type, a missing factory or a
 * type registered twice. Bifrost's `Register`.
 */
export function registerQueueType(type: string, factory: QueueFactory): void {
  if (typeof type !== 'string' || type === '') throw new InvalidArgumentError('queue type is empty');
  if (typeof factory !== 'function') throw new InvalidArgumentError(`queue type ${type}: factory is missing`);
  if (factories.has(type)) throw new InvalidArgumentError(`queue type ${type} is already registered`);
  factories.set(type, factory);
}

/** The registered queue types, sorted. Bifrost's `Registered`. */
export function registeredQueueTypes(): string[] {
  return [...factories.keys()].sort();
}

/**
 * Builds the queue `config` selects; resolves `undefined` when `config` is
 * absent or not enabled. Rejects with `UnsupportedError` for an unregistered
 * type, `InvalidArgumentError` for a malformed config block, or the
 * factory's error. Bifrost's `NewQueue`.
 */
export async function createQueue(config: QueueConfig | null | undefined, deps: QueueDependencies = {}): Promise<Queue | undefined> {
  if (!config || config.enabled !== true) return undefined;
  const factory = factories.get(config.type);
  if (!factory) {
    throw new UnsupportedError(`queue type ${JSON.stringify(config.type)} is not registered (known: ${registeredQueueTypes().join(', ')})`);
  }
  return factory(config.config, deps);
}

const ENGINE_FIELDS = ['retentionHours', 'ackedRetentionHours', 'janitorIntervalMs', 'maxPayloadBytes'] as const;

/**
 * Reads a type's config block: the engine fields plus `extra` names, each a
 * number except those listed in `strings`. Unknown keys are refused, so a
 * misspelt setting is not silently ignored. Throws `InvalidArgumentError`.
 */
export function parseConfigBlock(type: string, block: unknown, strings: readonly string[] = []): { engine: EngineConfig; fields: Record<string, string> } {
  if (block === undefined || block === null) block = {};
  if (typeof block !== 'object' || block === null || Array.isArray(block)) throw new InvalidArgumentError(`${type} queue config must be an object`);
  const engine: Record<string, number> = {};
  const fields: Record<string, string> = {};
  for (const [k, v] of Object.entries(block)) {
    if ((ENGINE_FIELDS as readonly string[]).includes(k)) {
      if (typeof v !== 'number') throw new InvalidArgumentError(`${type} queue config: ${k} must be a number`);
      engine[k] = v;
    } else if (strings.includes(k)) {
      if (typeof v !== 'string') throw new InvalidArgumentError(`${type} queue config: ${k} must be a string`);
      fields[k] = v;
    } else {
      throw new InvalidArgumentError(`${type} queue config: unknown setting ${JSON.stringify(k)} (known: ${[...ENGINE_FIELDS, ...strings].join(', ')})`);
    }
  }
  return { engine, fields };
}

registerQueueType('memory', (block, deps) => {
  const { engine } = parseConfigBlock('memory', block);
  return createStoreQueue(new MemoryStore(), { ...engine, onError: deps.onError });
});

registerQueueType('postgres', async (block, deps) => {
  const { engine, fields } = parseConfigBlock('postgres', block, ['connectionString', 'schema']);
  const pool = deps.pool;
  if (pool !== undefined && (typeof pool !== 'object' || pool === null || typeof (pool as { query?: unknown }).query !== 'function')) {
    throw new InvalidArgumentError('postgres queue: deps.pool must be a pg.Pool');
  }
  if (!fields.connectionString && pool === undefined) throw new InvalidArgumentError('postgres queue config: connectionString is required (or pass a pg.Pool as deps.pool)');
  if (fields.connectionString && pool !== undefined) throw new InvalidArgumentError('postgres queue: give connectionString or deps.pool, not both');
  const { PostgresStore } = await import('./stores/postgres/store.js');
  const store = await PostgresStore.open({
    ...(pool !== undefined ? { pool: pool as import('pg').Pool } : { connectionString: fields.connectionString }),
    ...(fields.schema !== undefined ? { schema: fields.schema } : {}),
  });
  try {
    return createStoreQueue(store, { ...engine, onError: deps.onError });
  } catch (err) {
    await store.close();
    throw err;
  }
});

registerQueueType('sqlite', async (block, deps) => {
  const { engine, fields } = parseConfigBlock('sqlite', block, ['path']);
  if (!fields.path) throw new InvalidArgumentError('sqlite queue config: path is required');
  const { SqliteStore } = await import('./stores/sqlite.js');
  const store = await SqliteStore.open({ path: fields.path });
  try {
    return createStoreQueue(store, { ...engine, onError: deps.onError });
  } catch (err) {
    await store.close();
    throw err;
  }
});

registerQueueType('clickhouse', async (block, deps) => {
  const { engine, fields } = parseConfigBlock('clickhouse', block, ['url', 'username', 'password', 'database']);
  if (!fields.url) throw new InvalidArgumentError('clickhouse queue config: url is required');
  const locker = deps.locker;
  if (locker !== undefined && (typeof locker !== 'object' || locker === null || typeof (locker as { acquire?: unknown }).acquire !== 'function')) {
    throw new InvalidArgumentError('clickhouse queue: deps.locker must be a DistributedLocker');
  }
  const { ClickHouseStore } = await import('./stores/clickhouse/store.js');
  const store = await ClickHouseStore.open({
    url: fields.url,
    ...(fields.username !== undefined ? { username: fields.username } : {}),
    ...(fields.password !== undefined ? { password: fields.password } : {}),
    ...(fields.database !== undefined ? { database: fields.database } : {}),
    ...(locker !== undefined ? { locker: locker as import('./lockers/types.js').DistributedLocker } : {}),
  });
  try {
    return createStoreQueue(store, { ...engine, onError: deps.onError });
  } catch (err) {
    await store.close();
    throw err;
  }
});
