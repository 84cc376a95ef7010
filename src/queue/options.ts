/**
 * Subscription options and engine configuration, each with its default where
 * it is declared. Durations are milliseconds; retentions are hours, as in the
 * configuration of Bifrost's queue package.
 */
import type { Codec } from '../codecs.js';
import { InvalidArgumentError } from '../errors.js';
import { knownKeys, rejectUnknownKeys } from '../known-keys.js';
import type { ErrorReporter, QueueLogger } from './events.js';
import type { PublishOptions } from './types.js';
import { checkTracing, type TracingOption, type TracingOptions } from './tracing-options.js';
import { shown } from '../show-value.js';

/** Default handlers running at once per subscription. Bifrost's `DefaultConcurrency`. */
export const DEFAULT_CONCURRENCY = 4;
/** Default deliveries claimed per poll. Bifrost's `DefaultBatchSize`. */
export const DEFAULT_BATCH_SIZE = 32;
/** Default wait between polls that found nothing, ms. Bifrost's `DefaultPollInterval`. */
export const DEFAULT_POLL_INTERVAL_MS = 1000;
/** Default lease, ms. Bifrost's `DefaultLeaseDuration`. */
export const DEFAULT_LEASE_DURATION_MS = 30_000;
/** Default attempts before dead-lettering. Bifrost's `DefaultMaxAttempts`. */
export const DEFAULT_MAX_ATTEMPTS = 5;
/** Default first retry delay, ms. Bifrost's `DefaultBackoffBase`. */
export const DEFAULT_BACKOFF_BASE_MS = 1000;
/** Default retry delay cap, ms. Bifrost's `DefaultBackoffMax`. */
export const DEFAULT_BACKOFF_MAX_MS = 300_000;

/**
 * Options of one subscription (Bifrost's `SubscribeOptions`); every field is
 * optional. `T` is the payload type of `codec`; left out, the options carry
 * no codec and fit a queue of any payload type.
 */
export interface SubscribeOptions<T = never> {
  /** Handlers this instance runs at once; also its cap on deliveries in flight. Default 4. */
  concurrency?: number;
  /** Most deliveries claimed per poll. Default 32. */
  batchSize?: number;
  /**
   * How often the store's shared poller asks whether this subscription has
   * due work, ms (the poller runs at the smallest interval of the
   * subscriptions on the store, one query for all of them; an idle
   * subscription makes no claim). Default 1000. A publish through the same
   * queue (or a store's wake source) wakes the subscription sooner.
   */
  pollIntervalMs?: number;
  /** How long a claim survives without a heartbeat, ms; heartbeats run every third of it. Default 30000. */
  leaseDurationMs?: number;
  /** Attempts (lost leases included) before a delivery is dead-lettered. Default 5. */
  maxAttempts?: number;
  /** First retry delay, ms; doubled per attempt. Default 1000. */
  backoffBaseMs?: number;
  /** Retry delay cap, ms. Default 300000. */
  backoffMaxMs?: number;
  /** Topic that receives a copy of every dead-lettered delivery; must differ from the subscribed topic. Default none. */
  deadLetterTopic?: string;
  /** Cap on the group's leases across every instance, counted in the store; 0 means none. Use one value for the whole group. Default 0. */
  maxInFlight?: number;
  /**
   * Cap on the deliveries the group starts per window, across every
   * instance, counted in the store (see `RateLimit`); use one value for the
   * whole group. Throws `UnsupportedError` from `subscribe` when the store
   * cannot count it, and `InvalidArgumentError` beside a `prefetch` above 0
   * (claims held for a slot would start later, in a burst). Default none.
   */
  rateLimit?: RateLimit;
  /** Which messages a newly registered group receives. Default `latest`. */
  startFrom?: StartFrom;
  /**
   * Deliveries this subscription may hold claimed beyond its running
   * handlers, waiting for a free slot, so a claim can fetch up to
   * `batchSize` even when every slot is busy. Raises throughput when
   * handlers are short and a claim's round trip is not; the held leases are
   * heartbeated, count against `maxInFlight`, are not available to other
   * instances meanwhile, and are released unrun by `close`. Default 0: a
   * claim asks only for free slots.
   */
  prefetch?: number;
  /**
   * Decodes each payload before the handler sees it, overriding the queue's
   * codec for this subscription. A payload it cannot decode is dead-lettered
   * at once (reason `decode`; the dead-letter copy keeps the stored bytes and
   * carries the codec's error in `x-queue-dlq-error`). Default: the queue's
   * codec, or raw bytes.
   */
  codec?: Codec<T>;
}

/**
 * Every key of `SubscribeOptions`; anything else is refused. A new option is
 * added here and to the interface (the compiler insists on both).
 */
export const SUBSCRIBE_OPTION_KEYS = knownKeys<SubscribeOptions>({
  concurrency: true,
  batchSize: true,
  pollIntervalMs: true,
  leaseDurationMs: true,
  maxAttempts: true,
  backoffBaseMs: true,
  backoffMaxMs: true,
  deadLetterTopic: true,
  maxInFlight: true,
  rateLimit: true,
  startFrom: true,
  prefetch: true,
  codec: true,
});

/** `SubscribeOptions` with every default applied. */
export type ResolvedSubscribeOptions = Required<Omit<SubscribeOptions<unknown>, 'deadLetterTopic' | 'codec' | 'rateLimit'>> & {
  deadLetterTopic?: string;
  rateLimit?: RateLimit;
  codec?: Codec<unknown>;
};

/** Throws `InvalidArgumentError` unless `c` is undefined or has `encode` and `decode` functions. */
export function checkCodec(c: unknown, where: string): Codec<unknown> | undefined {
  if (c === undefined) return undefined;
  const k = c as { encode?: unknown; decode?: unknown } | null;
  if (typeof k !== 'object' || k === null || typeof k.encode !== 'function' || typeof k.decode !== 'function') {
    throw new InvalidArgumentError(`${where} must have encode and decode functions`);
  }
  return c as Codec<unknown>;
}

const PUBLISH_OPTION_KEYS = knownKeys<PublishOptions<unknown>>({ codec: true });

/**
 * The codec of one `publish(...msgs, opts?)` call: takes its trailing
 * options object off `args` when there is one (an object with `codec` and
 * no `topic`), else `fallback`.
 * @throws InvalidArgumentError the options carry a key other than `codec` (a misspelt option is refused, not ignored), or a codec without `encode` and `decode`.
 */
export function takePublishCodec(args: unknown[], fallback: Codec<unknown> | undefined, where: string): Codec<unknown> | undefined {
  const last = args[args.length - 1];
  if (typeof last !== 'object' || last === null || 'topic' in last || !('codec' in last)) return fallback;
  args.pop();
  rejectUnknownKeys(`${where} option`, last, PUBLISH_OPTION_KEYS);
  return checkCodec((last as PublishOptions<unknown>).codec, `${where} option codec`);
}

/** Longest delay a Node timer takes, ms (about 24.8 days); a longer one fires after 1 ms. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

function check(name: string, v: number, min: number, integer = true, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
    throw new InvalidArgumentError(`${name} must be ${integer ? 'an integer' : 'a number'} from ${min} to ${max}, got ${shown(v)}`);
  }
  return v;
}

/** Every key of `RateLimit`. */
const RATE_LIMIT_KEYS = knownKeys<RateLimit>({ max: true, intervalMs: true });

/** Checks a `rateLimit` subscribe option; returns a copy. Throws `InvalidArgumentError`. */
function checkRateLimit(v: unknown): RateLimit {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new InvalidArgumentError(`rateLimit must be an object { max, intervalMs }, got ${shown(v)}`);
  const l = v as RateLimit;
  rejectUnknownKeys('rateLimit key', l, RATE_LIMIT_KEYS);
  return { max: check('rateLimit.max', l.max, 1), intervalMs: check('rateLimit.intervalMs', l.intervalMs, 1, true, MAX_TIMER_MS) };
}

/**
 * Applies the defaults to `opts` and validates the result. Throws
 * `InvalidArgumentError` for a value of the wrong type or out of range, or a
 * key that is not a `SubscribeOptions` field (a misspelt option is an error,
 * not a silent default).
 */
export function resolveSubscribeOptions<T>(opts: SubscribeOptions<T> = {}): ResolvedSubscribeOptions {
  rejectUnknownKeys('subscribe option', opts, SUBSCRIBE_OPTION_KEYS);
  const r: ResolvedSubscribeOptions = {
    concurrency: check('concurrency', opts.concurrency ?? DEFAULT_CONCURRENCY, 1),
    batchSize: check('batchSize', opts.batchSize ?? DEFAULT_BATCH_SIZE, 1),
    pollIntervalMs: check('pollIntervalMs', opts.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS, 1, false, MAX_TIMER_MS),
    leaseDurationMs: check('leaseDurationMs', opts.leaseDurationMs ?? DEFAULT_LEASE_DURATION_MS, 3, false, MAX_TIMER_MS),
    maxAttempts: check('maxAttempts', opts.maxAttempts ?? DEFAULT_MAX_ATTEMPTS, 1),
    backoffBaseMs: check('backoffBaseMs', opts.backoffBaseMs ?? DEFAULT_BACKOFF_BASE_MS, 0, false, MAX_TIMER_MS),
    backoffMaxMs: check('backoffMaxMs', opts.backoffMaxMs ?? DEFAULT_BACKOFF_MAX_MS, 0, false, MAX_TIMER_MS),
    maxInFlight: check('maxInFlight', opts.maxInFlight ?? 0, 0),
    startFrom: opts.startFrom ?? 'latest',
    prefetch: check('prefetch', opts.prefetch ?? 0, 0),
    deadLetterTopic: opts.deadLetterTopic,
    codec: checkCodec(opts.codec, 'codec'),
  };
  if (r.codec === undefined) delete r.codec;
  if (opts.rateLimit !== undefined) {
    r.rateLimit = checkRateLimit(opts.rateLimit);
    // The store counts claims; deliveries held for a slot would start later, several at once, past the limit.
    if (r.prefetch > 0) throw new InvalidArgumentError('rateLimit counts claims as starts, so it cannot be combined with prefetch (held claims would start later, in a burst): drop one of them');
  }
  if (r.backoffMaxMs < r.backoffBaseMs) throw new InvalidArgumentError('backoffMaxMs must be ≥ backoffBaseMs');
  if (r.startFrom !== 'latest' && r.startFrom !== 'earliest') {
    throw new InvalidArgumentError(`startFrom must be "latest" or "earliest", got ${shown(r.startFrom)}`);
  }
  return r;
}

/** Default retention of dead-lettered deliveries, hours. Bifrost's `DefaultRetentionHours`. */
export const DEFAULT_RETENTION_HOURS = 168;
/**
 * Longest `retentionHours` or `ackedRetentionHours`: 100 years of hours. A
 * store computes its purge cutoff as now minus the retention, in its own
 * time type; Postgres's timestamps and ClickHouse's DateTime64 (from 1900)
 * hold that, where a larger figure made every janitor pass fail.
 */
export const MAX_RETENTION_HOURS = 100 * 365 * 24;
/** Default retention of finished messages, hours. Bifrost's `DefaultAckedRetentionHours`. */
export const DEFAULT_ACKED_RETENTION_HOURS = 24;
/** Default time between janitor passes, ms (10 minutes). Bifrost's `DefaultJanitorInterval`. */
export const DEFAULT_JANITOR_INTERVAL_MS = 600_000;
/** Default payload limit, bytes (1 MiB). Bifrost's `DefaultMaxPayloadBytes`. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 1 << 20;

export type { ErrorReporter } from './events.js';

/**
 * Which messages a consumer group receives when it is registered for the first
 * time; no effect on an existing group. `latest` (default): only messages
 * published afterwards. `earliest`: also every message still retained on the
 * topic, in publish order. Bifrost's `StartFrom`.
 */
export type StartFrom = 'latest' | 'earliest';

/**
 * A cap on how many deliveries a consumer group starts, across every
 * instance: over any window of `intervalMs` milliseconds, at most `max`
 * claims (a claim is a start: an attempt, retries and recoveries included).
 * Counted in the store, like `maxInFlight`.
 */
export interface RateLimit {
  /** Most deliveries started per window, an integer ≥ 1. */
  max: number;
  /** The window's length, ms, an integer ≥ 1. */
  intervalMs: number;
}

/** Options of `Subscription.close` and `Queue.close`. */
export interface CloseOptions {
  /** Stop waiting for running handlers when this aborts. */
  signal?: AbortSignal;
  /** Stop waiting for running handlers after this many milliseconds. Default: the subscription's `leaseDurationMs`. */
  timeoutMs?: number;
}

/**
 * Tunes the generic engine (Bifrost's `EngineConfig`). The four numeric fields
 * are also accepted in a queue's JSON config. `T` is the payload type of
 * `codec`.
 */
export interface EngineConfig<T = Uint8Array> {
  /** How long dead-lettered deliveries are kept, hours (fractions allowed); also the furthest a message can be scheduled ahead. Default 168. */
  retentionHours?: number;
  /** How long a message is kept once every group has finished with it, hours, so a late `earliest` group still sees it. Default 24. */
  ackedRetentionHours?: number;
  /** Time between janitor passes, ms. Default 600000. */
  janitorIntervalMs?: number;
  /** Largest payload accepted by `publish`, bytes. Default 1 MiB. */
  maxPayloadBytes?: number;
  /**
   * Called with every error the engine handled (a failed claim, heartbeat,
   * ack, publish retry…). Kept beside the `error` event: each error goes to
   * this reporter, to `error` listeners and to `logger.error`, whichever
   * exist; only when none does is it printed with `console.warn`.
   */
  onError?: ErrorReporter;
  /**
   * Encodes payloads on `publish` and decodes them for handlers: `codecs.json`,
   * `codecs.utf8`, `codecs.bytes` or your own `{ encode, decode }`. Default
   * none: payloads are `Uint8Array` and stored as given.
   */
  codec?: Codec<T>;
  /**
   * A pino-shaped logger (`debug`, `info`, `warn`, `error`, each taking
   * `(obj, msg)`). Default none: nothing is logged, except handled errors
   * nobody else hears (see `onError`).
   */
  logger?: QueueLogger;
  /**
   * OpenTelemetry tracing (needs `@opentelemetry/api`, an optional peer
   * dependency; the SDK you register decides where spans go): `true`, or
   * `TracingOptions` to pick the tracer provider and span shapes. On,
   * `publish` makes a span and puts its W3C trace context in each message's
   * headers, and each handler attempt runs in a `process` span linked to it,
   * named and attributed after OpenTelemetry's messaging conventions (see
   * docs/QUEUE.md, Tracing). Default off: the API is not loaded and nothing
   * is added to messages. Throws `UnsupportedError` when on and the API is
   * not installed.
   */
  tracing?: TracingOption;
  /**
   * Whether this queue fires the schedules stored in its store (see
   * `Queue.schedule`): any number of instances may, and each tick is
   * published once. Turn it off in a process that only manages or inspects
   * the queue (a command-line tool), so opening the queue never publishes a
   * tick. Default true; without schedule support in the store, nothing
   * runs either way.
   */
  fireSchedules?: boolean;
}

/**
 * Every key of `EngineConfig`; anything else is refused. A new field is added
 * here and to the interface (the compiler insists on both).
 */
export const ENGINE_CONFIG_KEYS = knownKeys<EngineConfig>({
  retentionHours: true,
  ackedRetentionHours: true,
  janitorIntervalMs: true,
  maxPayloadBytes: true,
  onError: true,
  codec: true,
  logger: true,
  tracing: true,
  fireSchedules: true,
});

/** `EngineConfig` with every default applied. */
export type ResolvedEngineConfig = Required<Pick<EngineConfig, 'retentionHours' | 'ackedRetentionHours' | 'janitorIntervalMs' | 'maxPayloadBytes' | 'fireSchedules'>> & {
  onError?: ErrorReporter;
  codec?: Codec<unknown>;
  logger?: QueueLogger;
  /** Present when tracing is on: `tracing: true` gives `{}`. */
  tracing?: TracingOptions;
};

const HOUR_MS = 3_600_000;

/**
 * Applies the defaults to `cfg` and validates the result. Throws
 * `InvalidArgumentError` for a value of the wrong type or out of range, or a
 * key that is not an `EngineConfig` field.
 */
export function resolveEngineConfig<T>(cfg: EngineConfig<T> = {}): ResolvedEngineConfig {
  rejectUnknownKeys('engine config key', cfg, ENGINE_CONFIG_KEYS);
  if (cfg.onError !== undefined && typeof cfg.onError !== 'function') throw new InvalidArgumentError('onError must be a function');
  const positive = (name: string, v: number, integer: boolean, max = Number.MAX_SAFE_INTEGER): number => {
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || v > max || (integer && !Number.isInteger(v))) {
      throw new InvalidArgumentError(`${name} must be ${integer ? 'an integer' : 'a number'} above 0 and at most ${max}, got ${shown(v)}`);
    }
    return v;
  };
  if (cfg.onError !== undefined && typeof cfg.onError !== 'function') throw new InvalidArgumentError('onError must be a function');
  const logger = cfg.logger;
  if (logger !== undefined && (typeof logger !== 'object' || logger === null || !(['debug', 'info', 'warn', 'error'] as const).every((m) => typeof logger[m] === 'function'))) {
    throw new InvalidArgumentError('logger must have debug, info, warn and error functions');
  }
  const r: ResolvedEngineConfig = {
    retentionHours: positive('retentionHours', cfg.retentionHours ?? DEFAULT_RETENTION_HOURS, false, MAX_RETENTION_HOURS),
    ackedRetentionHours: positive('ackedRetentionHours', cfg.ackedRetentionHours ?? DEFAULT_ACKED_RETENTION_HOURS, false, MAX_RETENTION_HOURS),
    janitorIntervalMs: positive('janitorIntervalMs', cfg.janitorIntervalMs ?? DEFAULT_JANITOR_INTERVAL_MS, true, MAX_TIMER_MS),
    maxPayloadBytes: positive('maxPayloadBytes', cfg.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES, true),
    fireSchedules: cfg.fireSchedules ?? true,
  };
  if (typeof r.fireSchedules !== 'boolean') throw new InvalidArgumentError(`fireSchedules must be a boolean, got ${shown(r.fireSchedules)}`);
  if (cfg.onError) r.onError = cfg.onError;
  const codec = checkCodec(cfg.codec, 'codec');
  if (codec) r.codec = codec;
  if (logger) r.logger = logger;
  const tracing = checkTracing(cfg.tracing);
  if (tracing) r.tracing = tracing;
  return r;
}

/** Every key of `CloseOptions`; anything else is refused. */
export const CLOSE_OPTION_KEYS = knownKeys<CloseOptions>({ signal: true, timeoutMs: true });

/**
 * Checks the options of `Subscription.close` and `Queue.close`. Throws
 * `InvalidArgumentError` for an unknown key, a `timeoutMs` that is not a
 * number ≥ 0, or a `signal` that is not an `AbortSignal`. @internal
 */
export function checkCloseOptions(opts: CloseOptions | undefined): void {
  rejectUnknownKeys('close option', opts, CLOSE_OPTION_KEYS);
  if (opts?.timeoutMs !== undefined) check('timeoutMs', opts.timeoutMs, 0, false, MAX_TIMER_MS);
  if (opts?.signal !== undefined && !(opts.signal instanceof AbortSignal)) throw new InvalidArgumentError('signal must be an AbortSignal');
}

/** Hours to milliseconds. */
export function hoursToMs(hours: number): number {
  return hours * HOUR_MS;
}
