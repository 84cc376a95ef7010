/**
 * The shapes of `ferry/queue` (after the queue package of Bifrost, github.com/maximhq/bifrost, framework/queue): messages, deliveries, the public
 * `Queue` contract, and the `Store` SPI the generic engine is written against.
 */
import type { Codec } from '../codecs.js';
import { knownKeys } from '../known-keys.js';
import type { QueueEventEmitter } from './events.js';
import type { CloseOptions, RateLimit, StartFrom, SubscribeOptions } from './options.js';
export type { CloseOptions, RateLimit, StartFrom } from './options.js';
import type { ScheduleInfo, ScheduleOptions, ScheduleRecord } from './schedules/types.js';

/**
 * A unit of data published to a topic. Bifrost's `Message`.
 *
 * `id` and `publishedAt` are filled in by `publish` when absent; `publish`
 * returns the IDs it used and leaves the caller's object untouched.
 */
export interface Message<T = Uint8Array> {
  /** Caller-chosen ID (at most `MAX_ID_LENGTH` characters); when absent, a new time-ordered UUID (version 7). Publishing an ID that exists is a no-op. */
  id?: string;
  /** Topic name: 1–200 characters from `[A-Za-z0-9._-]`. */
  topic: string;
  /** Ordering key (at most `MAX_ID_LENGTH` characters). Messages with a key are delivered strictly in order per (topic, group, key). */
  key?: string;
  /**
   * The payload. Without a codec: opaque bytes, at most the queue's
   * `maxPayloadBytes`. With one (see `Codec`): a value the codec encodes to
   * such bytes on publish and decodes on delivery.
   */
  payload: T;
  /** Optional metadata, stored and delivered as given. */
  headers?: Record<string, string>;
  /** When the message was published; set by `publish` when absent. From `MIN_MESSAGE_TIME` to `MAX_MESSAGE_TIME`. */
  publishedAt?: Date;
  /** Not handed out before this instant. At most the queue's retention ahead, and not before `MIN_MESSAGE_TIME`. */
  deliverAt?: Date;
  /**
   * Claim priority, an integer from `MIN_PRIORITY` to `MAX_PRIORITY`
   * (default 0): among a group's due deliveries, higher first, then publish
   * order. A keyed message still waits for the earlier messages of its key
   * (a lane keeps publish order); at the head of its lane it competes by its
   * own priority. A store that cannot order by priority efficiently refuses a
   * non-zero one with `UnsupportedError` at publish. Absent when 0.
   */
  priority?: number;
}

/** The fields of a `Message`: `publish` refuses any other (a misspelt `deliverAt`, or BullMQ's `delay`, would otherwise deliver at once). @internal */
export const MESSAGE_KEYS = knownKeys<Message>({ id: true, topic: true, key: true, payload: true, headers: true, publishedAt: true, deliverAt: true, priority: true });

/** Lowest message priority (`Message.priority`): the smallest 32-bit integer. */
export const MIN_PRIORITY = -(2 ** 31);
/** Highest message priority (`Message.priority`): the largest 32-bit integer. */
export const MAX_PRIORITY = 2 ** 31 - 1;

/**
 * Earliest `publishedAt` or `deliverAt` a message may carry, in ms since
 * the epoch: 0001-01-01T00:00:00.000Z. With `MAX_MESSAGE_TIME`, the years
 * every store holds (PostgreSQL reads its times as ISO 8601 text, which
 * has four-digit years only), so a time is refused the same way on all of them.
 */
export const MIN_MESSAGE_TIME = -62_135_596_800_000;
/** Latest `publishedAt` a message may carry, in ms since the epoch: 9999-12-31T23:59:59.999Z. */
export const MAX_MESSAGE_TIME = 253_402_300_799_999;

/** A message as stored (or, typed by a codec, as delivered): its ID and publish time are always known. */
export interface StoredMessage<T = Uint8Array> extends Message<T> {
  id: string;
  publishedAt: Date;
}

/**
 * A message handed to one consumer group's handler, its payload decoded by
 * the subscription's codec (raw bytes without one). Bifrost's `Delivery`.
 */
export interface Delivery<T = Uint8Array> extends StoredMessage<T> {
  /** Deterministic per (message, group) and stable across redeliveries: the deduplication key. See `deliveryId`. */
  deliveryId: string;
  /** The consumer group this delivery belongs to. */
  group: string;
  /** Which attempt this is, 1-based. Lost leases count as attempts. */
  attempt: number;
}

/**
 * Processes one delivery. Resolving acknowledges it; throwing (any value)
 * schedules a retry with backoff; throwing `permanent(err)` dead-letters it at
 * once. `signal` aborts when the subscription closes past its deadline or when
 * the delivery's lease is lost to another consumer; after that the handler's
 * outcome is discarded. Bifrost's `Handler`.
 */
export type Handler<T = Uint8Array> = (delivery: Delivery<T>, signal: AbortSignal) => Promise<void>;

/** Point-in-time counts of one consumer group's deliveries on a topic. Bifrost's `Stats`. */
export interface QueueStats {
  /** Waiting to be claimed: due, scheduled, in retry backoff, behind their key, or with an expired lease. */
  pending: number;
  /** Held by a consumer under an unexpired lease. */
  leased: number;
  /** Dead-lettered and not yet purged. */
  dead: number;
  /**
   * How long the longest-waiting pending delivery has been claimable, ms (0
   * when none is): now minus the moment it became due — its `deliverAt` or
   * publish time, the end of its retry backoff, or the expiry of a lost
   * lease. Deliveries not due yet (scheduled, in backoff) do not count; one
   * due but held behind its key does. Read from the store's clock.
   */
  oldestPendingAgeMs: number;
  /** True while the group is paused (`Queue.pauseGroup`): no instance claims its deliveries. */
  paused: boolean;
}

/**
 * What `Store.stats` resolves with: `QueueStats`, where `paused` may be left
 * out by a store that keeps no pause state (the engine reports it as false).
 */
export type StoreStats = Omit<QueueStats, 'paused'> & { paused?: boolean };




/** A running consumer. Bifrost's `Subscription`. */
export interface Subscription extends AsyncDisposable {
  /**
   * Stops claiming, waits for running handlers until the deadline
   * (`timeoutMs`, `signal`), then aborts the ones still running and keeps
   * their leases (they are redelivered once the lease expires). Deliveries
   * claimed but never started are released without spending an attempt.
   * Rejects with the first release error, after finishing the rest. Idempotent.
   * Rejects with `InvalidArgumentError`, closing nothing, for an unknown key
   * in `opts`, a `timeoutMs` that is not a number ≥ 0 or a `signal` that is
   * not an `AbortSignal`.
   */
  close(opts?: CloseOptions): Promise<void>;
}

/**
 * The last argument of `publish` when it is not a message: encodes this
 * call's payloads with `codec` instead of the queue's.
 */
export interface PublishOptions<U> {
  codec: Codec<U>;
}

/**
 * The contract every queue implementation satisfies. Bifrost's `Queue`.
 *
 * `T` is the payload type of the queue's codec (`EngineConfig.codec`, or
 * `deps.codec` of `createQueue`); raw `Uint8Array` without one. The queue
 * also emits lifecycle events (see `QueueEvents`).
 */
export interface Queue<T = Uint8Array> extends AsyncDisposable, QueueEventEmitter {
  /**
   * Durably stores `msgs` and fans each one out to every group registered on
   * its topic; resolves with the message IDs, in order. Idempotent by ID.
   * Payloads go through the queue's codec, or through `{ codec }` given as
   * the last argument. Throws `CodecError` (the codec refused a payload),
   * `InvalidNameError`, `PayloadTooLargeError`, `ScheduleTooFarError`
   * or `InvalidArgumentError` (ID or key empty, too long, or not well-formed) before storing anything, `ClosedError`
   * after close, and the store's error after retrying a transient one 3 times.
   */
  publish(...msgs: Message<T>[]): Promise<string[]>;
  publish<U>(...args: [...msgs: Message<U>[], opts: PublishOptions<U>]): Promise<string[]>;
  /**
   * Registers `group` on `topic` (if new) and delivers its messages to
   * `handler` until the subscription is closed. Payloads are decoded with
   * `opts.codec`, else the queue's codec; one that fails to decode is
   * dead-lettered at once. Throws `InvalidNameError`,
   * `DeadLetterLoopError`, `InvalidArgumentError` for a bad or unknown option, `NoLockerError` or
   * `UnsupportedError` when the store cannot consume, `ClosedError`.
   */
  subscribe(topic: string, group: string, handler: Handler<T>, opts?: SubscribeOptions<T>): Promise<Subscription>;
  subscribe<U>(topic: string, group: string, handler: Handler<U>, opts: SubscribeOptions<U> & { codec: Codec<U> }): Promise<Subscription>;
  /** Counts `group`'s deliveries on `topic` and the age of its longest-waiting due one (a plain object, see `QueueStats`). Throws `InvalidNameError`. */
  stats(topic: string, group: string): Promise<QueueStats>;
  /**
   * Pauses consumer group `group` of `topic`, in the store, for every
   * instance: from the store's next claim on, no subscription of the group
   * claims (each instance's next poll or claim sees it); handlers already
   * running finish, and publishing goes on (messages wait). `stats` then
   * reports `paused: true`. Resolves true when the group is registered
   * (paused now, whether or not it was), false when it is not (nothing is
   * stored). On one queue, `subscribe`, `removeGroup`, `pauseGroup` and
   * `resumeGroup` of a group take effect in call order. Throws
   * `InvalidNameError`, `UnsupportedError` when the store keeps no pause
   * state, `ClosedError`, or the store's error (not retried).
   */
  pauseGroup(topic: string, group: string): Promise<boolean>;
  /**
   * Resumes consumer group `group` of `topic` for every instance: this
   * queue's subscriptions of the group claim at once, other instances' at
   * their next poll (at once where the store has a wake source). Resolves
   * true when the group is registered (running now, whether or not it was
   * paused), false when it is not. Throws as `pauseGroup`.
   */
  resumeGroup(topic: string, group: string): Promise<boolean>;
  /**
   * Deletes consumer group `group` of `topic` and every one of its deliveries
   * (pending, leased, acked, dead); resolves true when the group was
   * registered. Later publishes no longer fan out to it, and messages no
   * other group still needs become purgeable by the janitor. Leases other
   * instances hold on its deliveries are no longer held: their heartbeats
   * abort the handlers and their acks change nothing. Subscribing again
   * registers the group anew (`startFrom` applies). Throws `InvalidNameError`,
   * `InvalidArgumentError` while this queue has a subscription of that group
   * that has not finished closing, `UnsupportedError` when the store has no
   * `removeGroup`, `ClosedError`, or the store's error (not retried).
   */
  removeGroup(topic: string, group: string): Promise<boolean>;
  /**
   * The registered consumer groups, of `topic` or of every topic when it is
   * omitted, sorted by topic then group. Throws `InvalidNameError`,
   * `UnsupportedError` when the store has no `listGroups`, `ClosedError`,
   * or the store's error.
   */
  listGroups(topic?: string): Promise<ConsumerGroup[]>;
  /**
   * Republishes the dead-letter copies stored on `deadLetterTopic` to the
   * topic each came from (header `x-queue-dlq-source-topic`), in publish
   * order; see `RedriveOptions` and `RedriveResult`. The copies stay on
   * `deadLetterTopic`. Each republished message's ID is derived from its
   * copy's ID (`redriveId`), so redriving a copy again publishes nothing new
   * while that message is retained. Throws `InvalidNameError`,
   * `InvalidArgumentError` for bad options, `UnsupportedError` when the store
   * has no `listMessages`, `ClosedError`, a publish's error (after
   * retrying a transient one, as `publish` does), or the error `filter`
   * threw (the copies it had accepted before are republished first).
   */
  redrive(deadLetterTopic: string, opts?: RedriveOptions): Promise<RedriveResult>;
  /**
   * Reads the messages retained on `topic`, oldest first, one page at a time,
   * without consuming or changing anything: how a dead-letter topic is
   * inspected before a `redrive`. Payloads are the stored bytes (no codec is
   * applied, so a payload that would not decode can still be looked at).
   * Resolves `{ messages, next? }`; pass `next` as `after` for the following
   * page. Throws `InvalidNameError`, `InvalidArgumentError` for a bad option
   * or a cursor this store did not hand out, `UnsupportedError` when the
   * store has no `listMessages`, `ClosedError`, or the store's error.
   */
  listMessages(topic: string, opts?: ListMessagesOptions): Promise<MessagePage>;
  /**
   * Stores a recurring schedule named `name` (1–200 characters of
   * `[A-Za-z0-9._-]`): at every tick of `opts.cron` or `opts.everyMs`, one
   * message is published to `opts.topic` (see `ScheduleOptions`), however
   * many instances share the store. Every running queue on the store fires
   * it (`EngineConfig.fireSchedules`); each tick's message ID derives from
   * the name and the tick (`scheduleTickId`), so instances firing the same
   * tick store one message. Scheduling a name again with the same options
   * changes nothing (resolves false); with other options it replaces the
   * schedule, whose ticks then count from now (resolves true; a new name
   * resolves true too). `opts.payload` goes through the queue's codec.
   * Throws `InvalidNameError` (name or topic), `InvalidArgumentError` (a bad
   * or unknown option, a cron expression that does not parse or never
   * matches again, an unknown time zone), `PayloadTooLargeError`,
   * `CodecError`, `UnsupportedError` when the store keeps no schedules,
   * `ClosedError`, or the store's error (not retried).
   */
  schedule(name: string, opts: ScheduleOptions<T>): Promise<boolean>;
  /**
   * Deletes schedule `name`; resolves true when it existed. No instance
   * fires a tick of it afterwards, except one whose round had already read
   * it (such a round publishes at most the ticks that were due then).
   * Messages already published stay. Throws `InvalidNameError`,
   * `UnsupportedError`, `ClosedError`, or the store's error.
   */
  unschedule(name: string): Promise<boolean>;
  /**
   * The stored schedules, sorted by name, each with its last and next tick
   * (see `ScheduleInfo`). Throws `UnsupportedError` when the store keeps no
   * schedules, `ClosedError`, or the store's error.
   */
  listSchedules(): Promise<ScheduleInfo[]>;
  /** Checks that the backing store is reachable; rejects with its error. */
  ping(): Promise<void>;
  /**
   * Closes every subscription (see `Subscription.close`), then the queue's
   * own resources and store. New subscribes are refused from the call on;
   * publishes (a running handler's among them) are taken until the
   * subscriptions have closed and are stored before it resolves, later
   * ones reject with `ClosedError`. Idempotent. Rejects with
   * `InvalidArgumentError`, closing nothing, for bad `opts` (as
   * `Subscription.close`).
   */
  close(opts?: CloseOptions): Promise<void>;
}

/** A consumer group registered on a topic. */
export interface ConsumerGroup {
  topic: string;
  group: string;
}

/** Options of `Queue.redrive`. */
export interface RedriveOptions {
  /** Most copies to republish (an integer ≥ 1); skipped copies do not count. Default: all of them. */
  limit?: number;
  /** Start after this cursor: the `next` of an earlier redrive that stopped at its `limit`. Absent to start at the oldest retained copy. */
  after?: string;
  /** Republishes only the copies for which this returns (or resolves) true. Called once per copy that has a usable source topic, in publish order. */
  filter?: (copy: StoredMessage) => boolean | Promise<boolean>;
}

/** Options of `Queue.listMessages`. */
export interface ListMessagesOptions {
  /** The `next` cursor of the previous page; absent to start at the topic's oldest retained message. */
  after?: string;
  /** Most messages in the page, 1–1000. Default 100. */
  limit?: number;
}

/** What `Queue.redrive` did. */
export interface RedriveResult {
  /** IDs of the republished messages, in the copies' publish order. A copy redriven before yields the same ID again (its publish stored nothing new). */
  ids: string[];
  /** Copies passed over: no `x-queue-dlq-source-topic` header, a source topic that is not a valid name or is `deadLetterTopic` itself, or a payload over this queue's `maxPayloadBytes`. */
  skipped: number;
  /**
   * Present when the run stopped at its `limit` and more copies may follow:
   * pass it as `after` to go on from the copy after the last one this run
   * read. (Without it, the same `limit` again reads the same copies, and
   * republishes nothing new.)
   */
  next?: string;
}

// ---------------------------------------------------------------------------
// The Store SPI
// ---------------------------------------------------------------------------

/** One claim. Bifrost's `ClaimRequest`. */
export interface ClaimRequest {
  topic: string;
  group: string;
  /** Recorded as the holder, for debugging. */
  runnerId: string;
  /** Deliveries to lease at most (≥ 1). */
  max: number;
  /** Lease length in milliseconds, from the moment the store holds its write lock. */
  leaseMs: number;
  /** Cap on the group's unexpired leases across every instance; 0 means none. */
  maxInFlight: number;
  /**
   * Cap on the group's claims per window across every instance (see
   * `RateLimit`): the claim leases at most `max` minus the claims the
   * group made in the last `intervalMs`, and records the ones it makes.
   * Absent means none. Only sent to a store whose `capabilities.rateLimit`
   * is true.
   */
  rateLimit?: RateLimit;
  /**
   * Set by the engine beside `rateLimit`. A store may call it once, before
   * the claim resolves, when the rate limit kept the claim short of what it
   * would otherwise have leased, with how long from now (ms on the store's
   * clock, ≥ 1, at most `rateLimit.intervalMs`) until the window has room
   * for another claim. The subscription then claims again after that long
   * and not before (other wake-ups cannot make room). A store that never
   * calls it leaves the next try to the poller (`pollIntervalMs`); one that
   * calls it when nothing more was due costs one claim that finds nothing.
   */
  onRateLimited?: (waitMs: number) => void;
}

/** What `Store.ackAndClaim` resolves with. */
export interface AckAndClaimed {
  /** Delivery IDs of the acks that were still held and are now complete. */
  acked: string[];
  /** The deliveries the claim leased, in publish order. */
  claimed: Claimed[];
}

/** A delivery leased to one consumer. Bifrost's `Claimed`. */
export interface Claimed {
  /** Deterministic, see `deliveryId`. */
  deliveryId: string;
  /** Fences every write made under this claim. */
  claimToken: string;
  group: string;
  /** 1-based attempt this claim represents; lost leases count. */
  attempt: number;
  message: StoredMessage;
  /**
   * Set when the delivery's previous lease ran out with no outcome written:
   * its holder crashed, stalled or closed without finishing. Such a delivery
   * is claimed alone (see `Store.claim`); the engine claims again at once.
   */
  recovered?: true;
}

/** Options of `Store.kill`. */
export interface KillOptions {
  /** The claim being killed never ran a handler: do not count it as an attempt. */
  unrun?: boolean;
}

/** How long finished rows are kept, in milliseconds. Bifrost's `PurgePolicy`. */
export interface PurgePolicy {
  /** Dead-lettered deliveries, counted from their death. */
  deadRetentionMs: number;
  /** Messages no delivery needs any more, counted from the later of their due time and their last delivery's end. */
  ackedRetentionMs: number;
}

/** One page of `Store.listMessages`. */
export interface MessagePage {
  /** Messages of the topic in publish order, at most the page's `limit`. */
  messages: StoredMessage[];
  /** Pass as `after` to read the next page; absent when no message followed this page when it was read. */
  next?: string;
}

/** See `Store.capabilities`. */
export interface StoreCapabilities {
  readonly priority?: boolean;
  readonly rateLimit?: boolean;
  readonly overlappingClaims?: boolean;
}

/**
 * The storage SPI behind the generic engine (Bifrost's `Store`, plus its
 * optional `WakeSource` and `ConsumeChecker`). A store does storage only;
 * `createStoreQueue` adds polling, concurrency, heartbeats, retries,
 * dead-lettering and purging.
 *
 * Durations, never instants, cross this interface (milliseconds); each store
 * turns them into deadlines on its own clock. The exceptions are a message's
 * `deliverAt` and a schedule's instants (`ScheduleRecord`), which the store
 * keeps as given. Every write after `claim` is
 * fenced on `Claimed.claimToken`: once the delivery was claimed again, an old
 * token changes nothing and reports "not held".
 *
 * The calls that do I/O take an optional last `signal`. The engine aborts it
 * when a `close` deadline passes, and stops waiting for the call at that
 * moment whether or not the store honours it; a store that can, cancels the
 * call and rejects promptly, so nothing it holds (a pooled connection) is
 * left busy. A call abandoned this way may still land: a claim that lands
 * after it was abandoned leaves leases that simply run out.
 */
export interface Store {
  /** Registers `group` on `topic`. When new and `startFrom` is `earliest`, creates deliveries for every retained message on the topic, in publish order. An existing group is left alone. */
  ensureGroup(topic: string, group: string, startFrom: StartFrom, signal?: AbortSignal): Promise<void>;
  /** Stores messages (IDs and publish times set) and one pending delivery per group registered on each topic. Idempotent: existing messages and deliveries keep their state. */
  append(msgs: StoredMessage[], signal?: AbortSignal): Promise<void>;
  /**
   * `append` done before it returns, for a store that writes synchronously
   * (SQLite through better-sqlite3): throws what `append` would reject with.
   * When present, the engine's publishes use it and settle without a
   * promise of the store's.
   */
  appendNow?(msgs: StoredMessage[]): void;
  /**
   * Leases up to `req.max` due deliveries in publish order (in priority
   * order, then publish order, on a store with `capabilities.priority`),
   * each with a new token and attempt + 1. Due: its `deliverAt` and retry
   * backoff have passed or its lease expired, and, when keyed, no earlier
   * delivery with the same key is pending or leased. Honours
   * `req.maxInFlight`, `req.rateLimit` and a pause (`setGroupPaused`).
   *
   * A delivery whose lease expired (`Claimed.recovered`) is claimed alone:
   * when the first due delivery (in that order) is one, the claim returns
   * just it; otherwise the claim stops before the first one. Its holder may have crashed because
   * of it, and a crash it causes again must not spend the attempts of
   * deliveries that were merely claimed in the same batch (they come back
   * one at a time, each running before it can be blamed again).
   */
  claim(req: ClaimRequest, signal?: AbortSignal): Promise<Claimed[]>;
  /** Completes deliveries in one round trip; resolves with the IDs still held (the rest are untouched). */
  ack(cs: Claimed[], signal?: AbortSignal): Promise<string[]>;
  /**
   * Optional: `ack(acks)` then `claim(req)` as one atomic write (one
   * transaction, one durable commit), so a consumer whose next delivery waits
   * on its last ack (one key lane) pays one commit per message, not two. The
   * claim sees the acks: a key lane they free, and the leases they end under
   * `req.maxInFlight`. Resolves with the IDs of `acks` still held (acked, as
   * `ack` reports them) and the claim's deliveries, as `claim` would return
   * them. When it rejects, neither part was written. The engine uses it when
   * present and falls back to `ack` and `claim` otherwise.
   */
  ackAndClaim?(acks: Claimed[], req: ClaimRequest, signal?: AbortSignal): Promise<AckAndClaimed>;
  /** Records a failed attempt and makes the delivery due again after `backoffMs`. False when not held. */
  retry(c: Claimed, backoffMs: number, lastError: string, signal?: AbortSignal): Promise<boolean>;
  /**
   * Records a failed attempt and dead-letters the delivery. False when not
   * held. With `opts.unrun` the claim ran nothing (it was taken past
   * `maxAttempts` only to be dead-lettered), so the recorded attempt count
   * goes back by one, as `release` does.
   */
  kill(c: Claimed, lastError: string, opts?: KillOptions, signal?: AbortSignal): Promise<boolean>;
  /** Renews leases for `leaseMs` from now; resolves with the IDs still held. */
  extend(cs: Claimed[], leaseMs: number, signal?: AbortSignal): Promise<string[]>;
  /** Gives deliveries back, claimable at once, without spending an attempt. Stale tokens are ignored. */
  release(cs: Claimed[], signal?: AbortSignal): Promise<void>;
  /** Deletes up to `batch` rows of each kind that `policy` says have outlived their use; resolves with how many it removed. Never touches a pending or leased delivery. */
  purge(policy: PurgePolicy, batch: number, signal?: AbortSignal): Promise<number>;
  /** Counts `group`'s deliveries on `topic`, and measures `oldestPendingAgeMs` on the store's clock; `paused` from `setGroupPaused`. */
  stats(topic: string, group: string, signal?: AbortSignal): Promise<StoreStats>;
  /** Checks that the store is reachable. */
  ping(signal?: AbortSignal): Promise<void>;
  /**
   * Deletes group `group` of `topic` and all its deliveries, whatever their
   * state, atomically with respect to `append` and `ensureGroup` (no
   * delivery of the group survives or appears afterwards); resolves true when
   * the group was registered. Held claim tokens of those deliveries are then
   * not held. Messages left without deliveries are purged by `purge` like any
   * finished message. Optional for stores outside ferry (the engine then
   * throws `UnsupportedError` from `Queue.removeGroup`); ferry's stores have it.
   */
  removeGroup?(topic: string, group: string): Promise<boolean>;
  /** The registered groups of `topic`, or of every topic when it is undefined, sorted by topic then group (code-unit order). Optional, as `removeGroup`. */
  listGroups?(topic?: string): Promise<ConsumerGroup[]>;
  /**
   * Reads the messages stored on `topic` (not yet purged) in publish order,
   * `page.limit` (≥ 1) at most, starting after the cursor `page.after`
   * (from the start when absent). The cursor is opaque and only meaningful to
   * the store that returned it; a message appended after a page was read
   * comes later in publish order, so paging to the end finds it. Optional,
   * as `removeGroup` (needed by `Queue.redrive`).
   */
  listMessages?(topic: string, page: { after?: string; limit: number }): Promise<MessagePage>;
  /**
   * Optional: pauses (`paused` true) or resumes group `group` of `topic`,
   * stored so every instance sees it. While paused, `claim` (and the claim
   * of `ackAndClaim`, whose acks still apply) leases nothing for the group,
   * `duePairs` leaves the pair out, and `stats` reports `paused: true`;
   * nothing else changes (appends still fan out, leases run on, acks and
   * retries land). Resolves false when the group is not registered (nothing
   * is stored), true otherwise. A store with a wake source wakes the topic on
   * resume. Without it, `Queue.pauseGroup` and `resumeGroup` throw
   * `UnsupportedError`.
   */
  setGroupPaused?(topic: string, group: string, paused: boolean, signal?: AbortSignal): Promise<boolean>;
  /**
   * What the store does beyond the required SPI, read once by the engine.
   * `priority`: `claim` orders due deliveries by `Message.priority` (higher
   * first, then publish order; lanes keep publish order), through an index
   * rather than a sort of the backlog; without it the engine refuses a
   * non-zero priority at publish (`UnsupportedError`). `rateLimit`: `claim`
   * honours `ClaimRequest.rateLimit`; without it the engine refuses the
   * subscribe option. `overlappingClaims`: the store works on a call while
   * the engine waits (a database across a connection pool), and two claims
   * (or ack-and-claims) of one runner and group in flight at once each
   * take deliveries the other does not; a subscription that claims ahead
   * (`prefetch`) then keeps a second claim in flight while it handles the
   * first one's deliveries.
   */
  readonly capabilities?: StoreCapabilities;
  /** Releases the store's own resources (never a handle it borrowed). */
  close(): Promise<void>;
  /**
   * Optional wake source: calls `wake(topic)` whenever another instance may
   * have made a delivery on `topic` claimable (a publish; an ack or kill of a
   * keyed delivery, which frees its lane; a release), until `signal` aborts.
   * A latency optimisation only; polling finds every message anyway.
   * Resolves when stopped.
   */
  listen?(signal: AbortSignal, wake: (topic: string) => void): Promise<void>;
  /**
   * Optional: of the (topic, group) pairs given, those that may have a
   * claimable delivery now, by the store's clock, in one round trip for all
   * of them: a pending delivery past its `deliverAt` or retry backoff, a
   * leased one whose lease expired (recovery), or a message not yet given
   * to the group (a store that makes deliveries lazily). It may name a pair
   * whose claim then finds nothing (the head of a key lane is held, or
   * `maxInFlight` is reached), but must never leave out one whose claim
   * would return a delivery. Pairs not registered are left out. The
   * engine's poller (due-poller.ts) calls it once per poll interval for
   * every subscription of the process, so idle subscriptions cost one query
   * between them, not a claim each; without it each subscription claims
   * once per interval.
   */
  duePairs?(pairs: readonly ConsumerGroup[], signal?: AbortSignal): Promise<ConsumerGroup[]>;
  /** Optional: throws (e.g. `NoLockerError`) when this store cannot consume safely. Called by `subscribe` before registering anything. */
  canConsume?(): void | Promise<void>;
  /**
   * Optional: takes or renews the janitor role for `holder` for `ttlMs`;
   * true when `holder` has it. Without it every instance purges.
   */
  acquireJanitor?(holder: string, ttlMs: number): Promise<boolean>;
  /**
   * Optional, with `deleteSchedule`, `listSchedules` and `advanceSchedule`
   * (all four or none; without them `Queue.schedule` and its siblings throw
   * `UnsupportedError` and no instance fires anything): stores `s`, unless a
   * schedule named `s.name` with revision `s.revision` is there, which is
   * then left as it is (its `lastTick` included). A schedule of that name
   * with another revision is replaced whole, `lastTick` cleared. Resolves
   * true when it stored `s`. Atomic: two calls at once for one name leave
   * one of the two, whole.
   */
  putSchedule?(s: ScheduleRecord, signal?: AbortSignal): Promise<boolean>;
  /** Deletes schedule `name`; resolves true when it existed. */
  deleteSchedule?(name: string, signal?: AbortSignal): Promise<boolean>;
  /** Every stored schedule, sorted by name (code-unit order). */
  listSchedules?(signal?: AbortSignal): Promise<ScheduleRecord[]>;
  /**
   * Records that the ticks of schedule `name` up to `tick` were published:
   * sets its `lastTick` to `tick` unless it is already at or past it, and
   * only while the schedule still has `revision` (a compare-and-set on the
   * revision, so an instance working from options that were replaced or
   * deleted changes nothing, and a monotonic one on the tick, so instances
   * finishing in any order never move it back). Resolves false when no
   * schedule `name` with `revision` exists, true otherwise.
   */
  advanceSchedule?(name: string, revision: string, tick: Date, signal?: AbortSignal): Promise<boolean>;
}
