/**
 * `ferry/queue`: a durable pub/sub queue (after the queue package of Bifrost, github.com/maximhq/bifrost, framework/queue). Every consumer group on a
 * topic gets every message; consumers within a group compete. Delivery is at
 * least once, with retries, dead-lettering, per-key ordering and scheduling.
 * See docs/QUEUE.md.
 */
export type {
  AckAndClaimed,
  Claimed,
  ClaimRequest,
  CloseOptions,
  ConsumerGroup,
  Delivery,
  Handler,
  KillOptions,
  Message,
  ListMessagesOptions,
  MessagePage,
  PublishOptions,
  PurgePolicy,
  Queue,
  QueueStats,
  RateLimit,
  RedriveOptions,
  RedriveResult,
  StartFrom,
  Store,
  StoreCapabilities,
  StoreStats,
  StoredMessage,
  Subscription,
} from './types.js';
export { MAX_MESSAGE_TIME, MAX_PRIORITY, MIN_MESSAGE_TIME, MIN_PRIORITY } from './types.js';
export { codecs, type Codec } from '../codecs.js';
export { DIAGNOSTICS_CHANNEL_PREFIX } from './events.js';
export type {
  CompletedEvent,
  DeadLetteredEvent,
  DeadLetterReason,
  DeliveryEvent,
  LeaseLostEvent,
  QueueEventEmitter,
  QueueEvents,
  QueueListener,
  QueueLogger,
  RetryingEvent,
} from './events.js';
export { MAX_HEADER_BYTES, MAX_ID_LENGTH, MAX_NAME_LENGTH, validateName } from './names.js';
export { DELIVERY_ID_NAMESPACE, deliveryId } from './delivery-id.js';
export { isPermanent, permanent } from './permanent.js';
export {
  DEFAULT_ACKED_RETENTION_HOURS,
  DEFAULT_BACKOFF_BASE_MS,
  DEFAULT_BACKOFF_MAX_MS,
  DEFAULT_BATCH_SIZE,
  DEFAULT_CONCURRENCY,
  DEFAULT_JANITOR_INTERVAL_MS,
  DEFAULT_LEASE_DURATION_MS,
  DEFAULT_MAX_ATTEMPTS,
  DEFAULT_MAX_PAYLOAD_BYTES,
  DEFAULT_POLL_INTERVAL_MS,
  DEFAULT_RETENTION_HOURS,
  MAX_RETENTION_HOURS,
} from './options.js';
export type { EngineConfig, ErrorReporter, SubscribeOptions } from './options.js';
export type { ProcessOutcome } from './tracing.js';
export type { TracingOption, TracingOptions, TracingProvider } from './tracing-options.js';
export {
  HEADER_DLQ_ATTEMPTS,
  HEADER_DLQ_DELIVERY_ID,
  HEADER_DLQ_ERROR,
  HEADER_DLQ_GROUP,
  HEADER_DLQ_MESSAGE_ID,
  HEADER_DLQ_SOURCE_TOPIC,
  MAX_ERROR_BYTES,
} from './dead-letter.js';
export { HEADER_REDRIVE_FROM, REDRIVE_ID_NAMESPACE, redriveId } from './redrive.js';
export { HEADER_SCHEDULE, HEADER_SCHEDULE_TICK, SCHEDULE_ID_NAMESPACE, scheduleTickId } from './schedules/tick-message.js';
export type { CatchUp, ScheduleInfo, ScheduleOptions, ScheduleRecord, ScheduleSpec } from './schedules/types.js';
export { StoreQueue, createStoreQueue } from './engine.js';
export { createQueue, engineFromDeps, registerQueueType, registeredQueueTypes } from './registry.js';
export type { CreatedQueue, QueueConfig, QueueDependencies, QueueFactory } from './registry.js';
export { MemoryBacking, MemoryStore } from './stores/memory.js';
export type { MemoryStoreOptions } from './stores/memory.js';
// better-sqlite3 itself is imported only when SqliteStore.open runs.
export { SqliteStore } from './stores/sqlite/store.js';
export type { SqliteStoreOptions } from './stores/sqlite/store.js';
// pg itself is imported only when PostgresStore.open runs.
export { PostgresStore } from './stores/postgres/store.js';
export { POSTGRES_SESSION_OPTIONS } from './stores/postgres/connection.js';
export type { PostgresStoreOptions } from './stores/postgres/store.js';
// @clickhouse/client itself is imported only when ClickHouseStore.open runs.
export { ClickHouseStore } from './stores/clickhouse/store.js';
export type { ClickHouseStoreOptions } from './stores/clickhouse/store.js';
// Lockers: pg and ioredis load only when a locker opens its own connection.
export { PostgresLocker, ProcessLocker, RedisLocker } from './lockers/index.js';
export type { AcquireOptions, DistributedLocker, HeldLock, PostgresLockerOptions, RedisLockerOptions } from './lockers/index.js';
