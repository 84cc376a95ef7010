/**
 * What a queue tells the outside while it works: typed lifecycle events, an
 * optional pino-shaped logger, and the `onError` reporter kept from before
 * events existed. `QueueSignals` routes each happening to all three.
 */
import { channel } from 'node:diagnostics_channel';
import { EventEmitter } from 'node:events';

/** Reports an error the engine handled but the caller may want to see (a failed claim, heartbeat, ack…). `op` names the operation. */
export type ErrorReporter = (err: unknown, op: string) => void;

/** Fields every delivery event carries. */
export interface DeliveryEvent {
  topic: string;
  group: string;
  /** The delivery's ID (see `deliveryId`). */
  deliveryId: string;
  /** The message's ID. */
  messageId: string;
  /** The attempt this event is about, 1-based. */
  attempt: number;
}

/** `completed`: a handler resolved and its ack was written while the lease was still held. */
export interface CompletedEvent extends DeliveryEvent {
  /** How long the handler ran, ms. */
  durationMs: number;
}

/** `retrying`: a handler failed and the retry was written; the delivery is due again after `delayMs`. */
export interface RetryingEvent extends DeliveryEvent {
  /** Backoff before the next attempt, ms. */
  delayMs: number;
  /** What the handler threw. */
  error: unknown;
  /** How long the handler ran, ms. */
  durationMs: number;
}

/**
 * Why a delivery was dead-lettered: `permanent` — the handler threw
 * `permanent(err)`; `exhausted` — the last allowed attempt failed; `leases`
 * — its attempts were spent by lost leases, so it was not run again;
 * `decode` — the codec could not decode its payload (not run).
 */
export type DeadLetterReason = 'permanent' | 'exhausted' | 'leases' | 'decode';

/** `deadLettered`: the kill was written (after the copy on `deadLetterTopic`, when set). */
export interface DeadLetteredEvent extends DeliveryEvent {
  reason: DeadLetterReason;
  /** What the handler threw, the `CodecError` of a failed decode, or the attempts-exhausted error. */
  error: unknown;
  /** How long the handler ran, ms; absent when it did not run. */
  durationMs?: number;
  /** Where the copy went, when the subscription has a dead-letter topic. */
  deadLetterTopic?: string;
}

/**
 * `leaseLost`: this consumer no longer holds the delivery (a heartbeat found
 * it gone or lapsed, or an ack, retry or kill was refused as not held). The
 * handler's signal is aborted and its outcome discarded; the delivery comes
 * back to whoever claims it next.
 */
export interface LeaseLostEvent extends DeliveryEvent {
  /**
   * What noticed: `heartbeat` (a renewal found the lease gone), `lapse` (no
   * renewal was confirmed for a whole lease, so the lease ran out),
   * `claim` (this queue claimed the delivery again, so the older attempt's
   * lease is gone), or `ack`, `retry`, `kill` (the store refused the outcome).
   */
  op: 'heartbeat' | 'lapse' | 'claim' | 'ack' | 'retry' | 'kill';
}

/**
 * The queue's events and their listener arguments. `error` gets what the
 * `onError` reporter gets: an error the engine handled (a failed claim,
 * heartbeat, ack, publish retry…) and the operation's name. It is emitted
 * only while it has listeners, so an unlistened `error` never throws.
 */
export interface QueueEvents {
  completed: [event: CompletedEvent];
  retrying: [event: RetryingEvent];
  deadLettered: [event: DeadLetteredEvent];
  leaseLost: [event: LeaseLostEvent];
  error: [error: unknown, op: string];
}

/** A listener of event `K`. */
export type QueueListener<K extends keyof QueueEvents> = (...args: QueueEvents[K]) => void;

/** Subscribing to a queue's events (`node:events` semantics: listeners run synchronously, in order). */
export interface QueueEventEmitter {
  /** Adds `listener` for `event`. A listener that throws is reported as an error (op `<event> listener`) and does not disturb the queue. */
  on<K extends keyof QueueEvents>(event: K, listener: QueueListener<K>): this;
  /** Adds `listener` for the next `event` only. */
  once<K extends keyof QueueEvents>(event: K, listener: QueueListener<K>): this;
  /** Removes `listener` from `event`. */
  off<K extends keyof QueueEvents>(event: K, listener: QueueListener<K>): this;
}

/**
 * A logger shaped like pino's (`logger.warn(obj, msg)`); pino, and anything
 * with these four methods, fits. The queue logs `debug` for completions,
 * `warn` for handler failures (retrying, dead-lettered) and lost leases,
 * `error` for errors it handled. Fields: `topic`, `group`, `deliveryId`,
 * `messageId`, `attempt`, and `err` (pino's error key) where there is one.
 */
export interface QueueLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** `diagnostics_channel` names the queue publishes on, one per event: `ferry:queue:completed`, … Each message is the event object plus `queue`. */
export const DIAGNOSTICS_CHANNEL_PREFIX = 'ferry:queue:';

const channels = {
  completed: channel(`${DIAGNOSTICS_CHANNEL_PREFIX}completed`),
  retrying: channel(`${DIAGNOSTICS_CHANNEL_PREFIX}retrying`),
  deadLettered: channel(`${DIAGNOSTICS_CHANNEL_PREFIX}deadLettered`),
  leaseLost: channel(`${DIAGNOSTICS_CHANNEL_PREFIX}leaseLost`),
  error: channel(`${DIAGNOSTICS_CHANNEL_PREFIX}error`),
};

type LifecycleEvent = Exclude<keyof QueueEvents, 'error'>;

/**
 * Routes what happens in a queue to its listeners, its logger, its
 * `onError` reporter and `diagnostics_channel`. Nothing a listener, logger or
 * reporter throws reaches the engine.
 */
export class QueueSignals {
  readonly emitter = new EventEmitter();
  readonly #logger: QueueLogger | undefined;
  readonly #onError: ErrorReporter | undefined;
  readonly #owner: object;

  constructor(owner: object, logger: QueueLogger | undefined, onError: ErrorReporter | undefined) {
    this.#owner = owner;
    this.#logger = logger;
    this.#onError = onError;
  }

  /**
   * An error the engine handled. Goes to the `onError` reporter (when
   * given), to `error` listeners (when any), to the logger's `error` (when
   * given), and to `console.warn` only when none of those three exists.
   */
  readonly report: ErrorReporter = (err, op) => {
    let heard = false;
    if (this.#onError) {
      heard = true;
      this.#guard(() => this.#onError!(err, op));
    }
    if (this.emitter.listenerCount('error') > 0) {
      heard = true;
      try {
        this.emitter.emit('error', err, op);
      } catch (listenerErr) {
        this.#fallback(listenerErr, 'error listener');
      }
    }
    if (this.#logger) {
      heard = true;
      this.#guard(() => this.#logger!.error({ err, op }, `ferry/queue: ${op} failed`));
    }
    if (channels.error.hasSubscribers) channels.error.publish({ queue: this.#owner, error: err, op });
    if (!heard) console.warn(`ferry/queue: ${op} failed:`, err);
  };

  /**
   * Whether an event `name` would reach anyone (a listener, a diagnostics
   * channel subscriber or the logger): a caller with an event per delivery
   * skips building it when not.
   */
  hears(name: LifecycleEvent): boolean {
    return this.#logger !== undefined || this.emitter.listenerCount(name) > 0 || channels[name].hasSubscribers;
  }

  /** Emits a lifecycle event and logs it. */
  emit<K extends LifecycleEvent>(name: K, event: QueueEvents[K][0]): void {
    try {
      this.emitter.emit(name, event);
    } catch (err) {
      this.report(err, `${name} listener`);
    }
    if (channels[name].hasSubscribers) channels[name].publish({ ...event, queue: this.#owner });
    const log = this.#logger;
    if (!log) return;
    const { error, ...rest } = event as { error?: unknown };
    const fields = error === undefined ? rest : { ...rest, err: error };
    this.#guard(() => {
      switch (name) {
        case 'completed': return log.debug(fields, 'ferry/queue: delivery completed');
        case 'retrying': return log.warn(fields, 'ferry/queue: handler failed; retrying');
        case 'deadLettered': return log.warn(fields, 'ferry/queue: delivery dead-lettered');
        case 'leaseLost': return log.warn(fields, 'ferry/queue: lease lost');
      }
    });
  }

  #guard(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.#fallback(err, 'logger or onError');
    }
  }

  #fallback(err: unknown, op: string): void {
    try {
      console.warn(`ferry/queue: ${op} threw:`, err);
    } catch {
      // nothing left to tell
    }
  }
}
