/**
 * Building a queue from configuration (Bifrost's `NewQueue`, `Register`,
 * `Registered`). A config is JSON-shaped, `{ enabled, type, config }`; the
 * registered factory for `type` turns its `config` block into a `Queue`.
 * `memory`, `sqlite`, `postgres`, `clickhouse` and `nats` (NATS JetStream, a
 * broker implementing `Queue` directly) are registered here; other packages add theirs with
 * `registerQueueType`.
 */
import type { Codec } from '../codecs.js';
import { UnsupportedError, InvalidArgumentError } from '../errors.js';
import { knownKeys, nearKey, rejectUnknownKeys } from '../known-keys.js';
import { createStoreQueue } from './engine.js';
import type { QueueLogger } from './events.js';
import type { EngineConfig, ErrorReporter } from './options.js';
import type { TracingOption } from './tracing-options.js';
import { MemoryStore } from './stores/memory.js';
import type { Queue } from './types.js';

/** Selects and configures a queue implementation. Bifrost's `Config`. */
export interface QueueConfig {
  /** `false` builds no queue (`createQueue` resolves `undefined`); omitted or `true` builds it. */
  enabled?: boolean;
  /** A registered type: `memory`, `sqlite`, or one added with `registerQueueType`. */
  type: string;
  /** The type's own settings, as parsed JSON. `memory`: the engine fields. `sqlite`: `path` plus the engine fields. `postgres`: `connectionString` (or a `pg.Pool` as `deps.pool`, never closed by the queue) and `schema`, plus the engine fields. `clickhouse`: `url`, optional `username`, `password`, `database`, plus the engine fields, with the shared locker as `deps.locker` (required to consume). `nats`: see `NatsQueueConfig` (servers, stream prefix, replicas, duplicate window, credentials, `retentionHours`, `maxPayloadBytes`). */
  config?: unknown;
}

/**
 * Shared resources a factory may build on; a queue never closes them.
 * Bifrost's `Dependencies`. `T` is the payload type of `codec`.
 */
export interface QueueDependencies<T = Uint8Array> {
  /** Where the engine reports errors it handled (see `EngineConfig.onError`). */
  onError?: ErrorReporter;
  /** The queue's codec (see `EngineConfig.codec`); types the queue as `Queue<T>`. Default: raw bytes. */
  codec?: Codec<T>;
  /** A pino-shaped logger (see `EngineConfig.logger`). Default none. */
  logger?: QueueLogger;
  /** OpenTelemetry tracing (see `EngineConfig.tracing`): here it may be `TracingOptions` with a tracer provider; it overrides the config block's `tracing`. Default: the config block's. */
  tracing?: TracingOption;
  /** Whether the queue fires the store's schedules (see `EngineConfig.fireSchedules`). Default true. */
  fireSchedules?: boolean;
  /** `postgres`: a `pg.Pool` to use instead of a `connectionString`; the queue never ends it. */
  pool?: unknown;
  /** `clickhouse`: the `DistributedLocker` every instance shares; without it the queue can publish but `subscribe` throws `NoLockerError`. Never closed by the queue. */
  locker?: unknown;
  /** Anything a registered type needs (a connection pool, a locker…), by name. */
  [name: string]: unknown;
}

/**
 * Builds a queue from its type's `config` block. Bifrost's `Factory`. A
 * factory must apply `deps.codec`, `deps.onError`, `deps.logger`,
 * `deps.tracing` and `deps.fireSchedules` (pass them to `createStoreQueue`,
 * as `engineFromDeps` does): the queue it returns is typed by `deps.codec`.
 */
// `any`: a factory serves every payload type; `createQueue` gives the result its type.
export type QueueFactory = (config: unknown, deps: QueueDependencies<any>) => Promise<Queue<any>> | Queue<any>;

/** The engine settings carried by `deps`: `onError`, `codec`, `logger`, `tracing` and `fireSchedules`, each only when given. */
export function engineFromDeps(deps: QueueDependencies<unknown>): EngineConfig<unknown> {
  const out: EngineConfig<unknown> = {};
  if (deps.onError !== undefined) out.onError = deps.onError;
  if (deps.codec !== undefined) out.codec = deps.codec;
  if (deps.logger !== undefined) out.logger = deps.logger;
  if (deps.tracing !== undefined) out.tracing = deps.tracing;
  if (deps.fireSchedules !== undefined) out.fireSchedules = deps.fireSchedules;
  return out;
}

/** The `deps` names ferry's own types read. */
const DEPS_KEYS = ['onError', 'codec', 'logger', 'tracing', 'fireSchedules', 'pool', 'locker'] as const satisfies readonly (keyof QueueDependencies)[];

/**
 * Checks `deps`: an object, and no key that looks like a slip of one ferry
 * reads (`fireSchedule`, `onerror`), which would otherwise be passed over
 * in silence. Other names pass: a registered type may read its own.
 */
function checkDeps(deps: unknown): void {
  if (typeof deps !== 'object' || deps === null || Array.isArray(deps)) throw new InvalidArgumentError('createQueue deps must be an object');
  for (const key of Object.keys(deps)) {
    if ((DEPS_KEYS as readonly string[]).includes(key)) continue;
    const near = nearKey(key, DEPS_KEYS);
    if (near !== undefined) throw new InvalidArgumentError(`createQueue deps key ${JSON.stringify(key)} is not one ferry reads: did you mean ${JSON.stringify(near)}?`);
  }
}

/** Every key of `QueueConfig`; anything else is refused. */
const QUEUE_CONFIG_KEYS = knownKeys<QueueConfig>({ enabled: true, type: true, config: true });

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
 * What `createQueue(config)` resolves for a config of type `C`: `undefined`
 * for an absent config or `enabled: false`; a `Queue` when `enabled` is
 * omitted or `true`; `Queue | undefined` when the type cannot tell (a plain
 * `QueueConfig`, or `any` from `JSON.parse`).
 */
export type CreatedQueue<C, T = Uint8Array> = 0 extends 1 & C
  ? Queue<T> | undefined
  : C extends null | undefined
    ? undefined
    : C extends { enabled: false }
      ? undefined
      : C extends { enabled: true }
        ? Queue<T>
        : 'enabled' extends keyof C
          ? Queue<T> | undefined
          : Queue<T>;

/**
 * Builds the queue `config` selects, typed `Queue<T>` by `deps.codec`.
 * Resolves `undefined`, building nothing, when `config` is absent (`null` or
 * `undefined`) or says `enabled: false`; with `enabled` omitted or `true` it
 * builds the queue. Rejects with `UnsupportedError` for an unregistered type,
 * `InvalidArgumentError` for a malformed config (not an object, `enabled` not
 * a boolean, an unknown or mistyped setting, `deps` not an object or with a
 * key that looks like a misspelling of one ferry reads), or the factory's
 * error. Bifrost's `NewQueue`. Giving `T` explicitly (`createQueue<Job>(…)`) leaves
 * `C` at its default, so the result is then `Queue<Job> | undefined`.
 */
export function createQueue<T = Uint8Array, C extends QueueConfig | null | undefined = QueueConfig | null | undefined>(
  config: C,
  deps?: QueueDependencies<T>,
): Promise<CreatedQueue<C, T>>;
export async function createQueue(config: QueueConfig | null | undefined, deps: QueueDependencies<unknown> = {}): Promise<Queue<unknown> | undefined> {
  if (config === null || config === undefined) return undefined;
  if (typeof config !== 'object' || Array.isArray(config)) throw new InvalidArgumentError('queue config must be an object');
  rejectUnknownKeys('queue config key', config, QUEUE_CONFIG_KEYS);
  checkDeps(deps);
  if (config.enabled !== undefined && typeof config.enabled !== 'boolean') {
    throw new InvalidArgumentError(`queue config: enabled must be a boolean, got ${JSON.stringify(config.enabled)}`);
  }
  if (config.enabled === false) return undefined;
  const factory = factories.get(config.type);
  if (!factory) {
    throw new UnsupportedError(`queue type ${JSON.stringify(config.type)} is not registered (known: ${registeredQueueTypes().join(', ')})`);
  }
  return (await factory(config.config, deps)) as Queue<unknown>;
}

/** The `EngineConfig` fields a JSON config block may set: the numeric ones, and `tracing` as a boolean. */
const ENGINE_FIELDS = ['retentionHours', 'ackedRetentionHours', 'janitorIntervalMs', 'maxPayloadBytes', 'tracing'] as const satisfies readonly (keyof EngineConfig)[];

/**
 * Reads a type's config block: the engine fields plus `extra` names, each a
 * number except those listed in `strings`. Unknown keys are refused, so a
 * misspelt setting is not silently ignored. Throws `InvalidArgumentError`.
 */
export function parseConfigBlock(type: string, block: unknown, strings: readonly string[] = []): { engine: EngineConfig; fields: Record<string, string> } {
  if (block === undefined || block === null) block = {};
  if (typeof block !== 'object' || block === null || Array.isArray(block)) throw new InvalidArgumentError(`${type} queue config must be an object`);
  const engine: Record<string, number | boolean> = {};
  const fields: Record<string, string> = {};
  for (const [k, v] of Object.entries(block)) {
    if (k === 'tracing') {
      if (typeof v !== 'boolean') throw new InvalidArgumentError(`${type} queue config: tracing must be a boolean (a tracer provider goes in deps.tracing)`);
      engine[k] = v;
    } else if ((ENGINE_FIELDS as readonly string[]).includes(k)) {
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
  return createStoreQueue(new MemoryStore(), { ...engine, ...engineFromDeps(deps) });
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
    return createStoreQueue(store, { ...engine, ...engineFromDeps(deps) });
  } catch (err) {
    await store.close();
    throw err;
  }
});

registerQueueType('sqlite', async (block, deps) => {
  const { engine, fields } = parseConfigBlock('sqlite', block, ['path']);
  if (!fields.path) throw new InvalidArgumentError('sqlite queue config: path is required');
  const { SqliteStore } = await import('./stores/sqlite/store.js');
  const store = await SqliteStore.open({ path: fields.path });
  try {
    return createStoreQueue(store, { ...engine, ...engineFromDeps(deps) });
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
    return createStoreQueue(store, { ...engine, ...engineFromDeps(deps) });
  } catch (err) {
    await store.close();
    throw err;
  }
});

registerQueueType('nats', async (block, deps) => {
  const { resolveNatsConfig } = await import('./brokers/nats/config.js');
  const cfg = resolveNatsConfig(block);
  if (deps.tracing !== undefined) throw new UnsupportedError('nats queue: tracing is not supported yet');
  const { openNatsQueue } = await import('./brokers/nats/queue.js');
  return openNatsQueue(cfg, {
    ...(deps.codec !== undefined ? { codec: deps.codec as Codec<unknown> } : {}),
    ...(deps.onError !== undefined ? { onError: deps.onError } : {}),
    ...(deps.logger !== undefined ? { logger: deps.logger } : {}),
  });
});
