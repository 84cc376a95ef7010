/**
 * The names each entry point of the package exports at run time, as the docs
 * describe them. test/docs/exports.test.ts holds the sources to this list and
 * test/package/pack.test.ts the packed package; a name added to or dropped
 * from an entry point is a change of the public surface, made here on purpose.
 */

/** What `ferry` exports; `ferry/diskqueue` and `ferry/spool` export it too. */
const ERRORS = [
  'ClosedError', 'CodecError', 'CorruptError', 'DeadLetterLoopError', 'ExceedsCapError', 'FerryError', 'FullError',
  'GroupLostError', 'IOError', 'InvalidArgumentError', 'InvalidNameError', 'LockedError', 'NoLockerError', 'OffsetError',
  'PayloadTooLargeError', 'RecordTooLargeError', 'ScheduleTooFarError', 'SegmentSizeMismatchError', 'UnsupportedError',
  'WrongFormatError', 'isFerryError',
];

/** Entry point (as a user imports it) → its source barrel and the value names it exports, sorted. */
export const ENTRY_POINTS: Record<string, { source: string; values: readonly string[] }> = {
  ferry: { source: 'src/index.ts', values: [...ERRORS].sort() },
  'ferry/diskqueue': {
    source: 'src/diskqueue/index.ts',
    values: [
      ...ERRORS, 'DEFAULT_MAX_SEGMENTS', 'DEFAULT_SEGMENT_SIZE', 'DiskQueue', 'FORMAT_VERSION', 'Reader', 'codecs', 'packOffset',
      'unpackOffset', 'verifyQueue',
    ].sort(),
  },
  'ferry/spool': {
    source: 'src/spool/index.ts',
    values: [
      ...ERRORS, 'DEFAULT_MAX_BYTES', 'DEFAULT_SEGMENT_BYTES', 'FORMAT_VERSION', 'FRAME_OVERHEAD', 'MAX_RECORD_BYTES', 'Popped', 'PoppedRun',
      'Spool', 'UNBOUNDED', 'verifySpool',
    ].sort(),
  },
  'ferry/queue': {
    source: 'src/queue/index.ts',
    values: [
      'ClickHouseStore', 'DEFAULT_ACKED_RETENTION_HOURS', 'DEFAULT_BACKOFF_BASE_MS', 'DEFAULT_BACKOFF_MAX_MS', 'DEFAULT_BATCH_SIZE',
      'DEFAULT_CONCURRENCY', 'DEFAULT_JANITOR_INTERVAL_MS', 'DEFAULT_LEASE_DURATION_MS', 'DEFAULT_MAX_ATTEMPTS',
      'DEFAULT_MAX_PAYLOAD_BYTES', 'DEFAULT_POLL_INTERVAL_MS', 'DEFAULT_RETENTION_HOURS', 'DELIVERY_ID_NAMESPACE',
      'DIAGNOSTICS_CHANNEL_PREFIX', 'HEADER_DLQ_ATTEMPTS', 'HEADER_DLQ_DELIVERY_ID', 'HEADER_DLQ_ERROR', 'HEADER_DLQ_GROUP',
      'HEADER_DLQ_MESSAGE_ID', 'HEADER_DLQ_SOURCE_TOPIC', 'HEADER_REDRIVE_FROM', 'HEADER_SCHEDULE', 'HEADER_SCHEDULE_TICK', 'MAX_ERROR_BYTES', 'MAX_HEADER_BYTES', 'MAX_ID_LENGTH',
      'MAX_MESSAGE_TIME', 'MAX_NAME_LENGTH', 'MAX_PRIORITY', 'MAX_RETENTION_HOURS', 'MIN_MESSAGE_TIME', 'MIN_PRIORITY', 'MemoryBacking', 'MemoryStore', 'POSTGRES_SESSION_OPTIONS', 'PostgresLocker', 'PostgresStore', 'ProcessLocker',
      'REDRIVE_ID_NAMESPACE', 'RedisLocker', 'SCHEDULE_ID_NAMESPACE', 'scheduleTickId', 'SqliteStore', 'StoreQueue', 'codecs', 'createQueue', 'createStoreQueue',
      'deliveryId', 'engineFromDeps', 'isPermanent', 'permanent', 'redriveId', 'registerQueueType', 'registeredQueueTypes',
      'validateName',
    ].sort(),
  },
  'ferry/metrics': { source: 'src/metrics/index.ts', values: ['DEFAULT_DURATION_BUCKETS', 'openTelemetryMetrics', 'prometheusMetrics'] },
};
