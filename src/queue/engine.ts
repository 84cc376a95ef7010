/**
 * The generic engine: a `Queue` built on any `Store` (Bifrost's queue package
 * `NewStoreQueue`). A store keeps rows; everything that happens in time lives
 * here and in subscription.ts.
 *
 * The life of a subscription:
 *
 * - **Subscribe.** Names and options are checked, the store is asked whether
 *   it can consume, and the group is registered (an `earliest` group gets
 *   deliveries for every retained message now; `latest` gets none).
 * - **Poll.** The loop asks the store for at most `min(batchSize, free
 *   slots + prefetch room)` due deliveries; with `prefetch`, claimed ones
 *   beyond the free slots wait in claim order for a slot (leases renewed,
 *   dropped unrun if a lease lapses, released unrun at close), and the loop
 *   claims again once that list has drained to half. A full answer means there may be more, so it asks
 *   again at once; a short one means nothing else is due, so it sleeps until
 *   woken by anything that may have made a delivery claimable: the store's
 *   poller (due-poller.ts), which every `pollIntervalMs` asks the store in
 *   one query which (topic, group) pairs of all the subscriptions on it
 *   have due work and wakes only those; a publish through this queue; an ack or dead letter written by
 *   this queue that frees the head of a key lane (or a lease under
 *   `maxInFlight`); a timer for the earliest moment this queue knows work
 *   comes due (a retry's backoff ends, a message it published with
 *   `deliverAt` comes due, a lease it lost or abandoned runs out); the
 *   store's wake source (other instances' publishes, lane-freeing acks and
 *   dead letters, releases); or, when a slot was the limit, a slot freeing up.
 *   A wake-up costs one claim: when nothing is claimable (a key lane's head
 *   in backoff, or the group paused) the loop sleeps again until the next
 *   event; the poller leaves a paused group out, and resuming wakes this
 *   queue's subscriptions of the group. A claim the group's `rateLimit` cut
 *   short is followed by a sleep no wake-up ends, for as long as the store
 *   says the window needs to have room again (hold-off.ts); a store that
 *   cannot say leaves that to the poller.
 *   A failed claim is reported and retried after the poll interval: it never
 *   ends the subscription.
 * - **Claim.** Each delivery comes back with a claim token and its 1-based
 *   attempt. An attempt past `maxAttempts` means its earlier leases were lost
 *   (crashes, stalls); it is dead-lettered without running, and that last
 *   claim is not counted: the dead delivery and its dead-letter copy record
 *   the attempts that ran (`maxAttempts`).
 * - **Decode.** With a codec (the subscription's, else the queue's) the
 *   payload is decoded first; one that cannot be decoded is dead-lettered at
 *   once without running (reason `decode`), since it would fail every time.
 * - **Run.** The handler gets the delivery and an AbortSignal. It holds one
 *   of the `concurrency` worker slots until it returns; a retry or dead
 *   letter keeps the slot until written, while a success hands it on at once
 *   and leaves its ack to be written in the background (the lease stays held
 *   and heartbeated until then, so `maxInFlight` and key lanes still see it).
 *   Unwritten acks are bounded: past a backlog the loop stops claiming.
 * - **Heartbeat.** Every `leaseDurationMs / 3` the held leases are renewed in
 *   one call. A lease the store no longer reports held, or one whose last
 *   renewal is older than the lease (heartbeats kept failing), is lost: the
 *   handler's signal aborts and whatever it returns is discarded, because
 *   another consumer may own the delivery now.
 * - **Outcome.** Resolving acks: acks queue up while the previous write is
 *   in flight and go to the store together, so a slow store gets larger
 *   batches, not more round trips. A failed ack write is reported and its
 *   deliveries come back once their leases run out. Throwing retries after `backoffBaseMs·2^(n−1)`,
 *   capped at `backoffMaxMs`, with equal jitter. `permanent(err)`, or a failure
 *   of the last allowed attempt, dead-letters: first the copy on
 *   `deadLetterTopic` (if set; if that publish fails the delivery is retried
 *   instead), then the kill. Every write carries the claim token, so a stale
 *   consumer changes nothing.
 * - **Events.** Each written outcome is told once, after the store accepted
 *   it: `completed`, `retrying`, `deadLettered`; a lease found gone is
 *   `leaseLost`; handled errors go to `error` listeners, `onError` and the
 *   logger (events.ts).
 * - **Close.** Claiming stops; a claim still in flight is released without
 *   spending an attempt. Running handlers get until the deadline to finish
 *   and have their outcomes (queued acks included) written; then the rest are aborted and keep their
 *   leases, so they come back only after the lease runs out.
 *
 * Beside the subscriptions the queue runs the janitor (janitor.ts), when
 * the store has one its wake source, and when the store keeps schedules the
 * scheduler that fires them (schedules/scheduler.ts).
 */
import { randomUUID } from 'node:crypto';
import type { Codec } from '../codecs.js';
import { ClosedError, CodecError, DeadLetterLoopError, PayloadTooLargeError, ScheduleTooFarError, UnsupportedError, InvalidArgumentError } from '../errors.js';
import { GuardedStore, armCloseDeadline, raceSignal, settledBefore, stopController } from './abortable.js';
import { KeyedLock, groupKey, requireStoreOp } from './admin.js';
import { AttemptRegistry } from './attempt.js';
import { knownKeys, rejectUnknownKeys } from '../known-keys.js';
import { errorText } from './dead-letter.js';
import { QueueSignals } from './events.js';
import type { QueueEvents, QueueListener } from './events.js';
import { Janitor } from './janitor.js';
import { uuidV7 } from './message-id.js';
import { MAX_HEADER_BYTES, validateId, validateMessageTime, validateName } from './names.js';
import { PublishBatcher } from './publish-batcher.js';
import { shown } from '../show-value.js';
import { DEFAULT_LEASE_DURATION_MS, checkCloseOptions, hoursToMs, resolveEngineConfig, resolveSubscribeOptions, takePublishCodec } from './options.js';
import type { EngineConfig, ResolvedEngineConfig, SubscribeOptions } from './options.js';
import { redrive } from './redrive.js';
import { isTransient } from './stores/transient.js';
import { DuePoller } from './due-poller.js';
import { StoreSubscription } from './subscription.js';
import { QueueTracing } from './tracing.js';
import { WakeTimer } from './wake-timer.js';
import { systemClock } from './schedules/clock.js';
import type { ScheduleClock } from './schedules/clock.js';
import { ScheduleOps, hasSchedules } from './schedules/operations.js';
import { Scheduler } from './schedules/scheduler.js';
import type { SchedulerTimings } from './schedules/scheduler.js';
import type { ScheduleInfo, ScheduleOptions } from './schedules/types.js';
import type { SubscriptionHost } from './subscription.js';
import { MAX_PRIORITY, MESSAGE_KEYS, MIN_PRIORITY } from './types.js';
import type { CloseOptions, ConsumerGroup, Handler, ListMessagesOptions, Message, MessagePage, PublishOptions, Queue, QueueStats, RedriveOptions, RedriveResult, Store, StoredMessage, Subscription } from './types.js';

/** Default and largest page of `Queue.listMessages`. */
const DEFAULT_LIST_LIMIT = 100;
const MAX_LIST_LIMIT = 1000;
const LIST_MESSAGES_OPTION_KEYS = knownKeys<ListMessagesOptions>({ after: true, limit: true });

/** How many times `publish` retries a transient store error. */
export const PUBLISH_RETRIES = 3;
/** First delay between publish retries, ms; doubled each time (25, 50, 100). */
export const PUBLISH_RETRY_BASE_MS = 25;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Seams for tests: the scheduler's clock and timings. @internal */
export interface EngineInternals {
  clock?: ScheduleClock;
  scheduleTimings?: SchedulerTimings;
}

/** The payload bytes of `msgs` (what a shared append's statement carries most of). */
function payloadBytes(msgs: StoredMessage[]): number {
  let n = 0;
  for (const m of msgs) n += m.payload.byteLength;
  return n;
}

/**
 * A `Queue` over a `Store`. Built by `createStoreQueue`; owns the store and
 * closes it. `T` is the payload type of its codec (raw bytes without one).
 */
export class StoreQueue<T = Uint8Array> implements Queue<T> {
  readonly #store: Store;
  /** Aborted when close's deadline passes: the queue's own store calls still in flight are given up. */
  readonly #stop = stopController();
  /** The store, its calls cut short by `#stop`. */
  readonly #guarded: GuardedStore;
  /** The newest attempt of each delivery this queue's subscriptions hold (one attempt at a time). */
  readonly #attempts = new AttemptRegistry();
  readonly #cfg: ResolvedEngineConfig;
  readonly #signals: QueueSignals;
  readonly #subs = new Set<StoreSubscription>();
  /** `#subs` by topic, for wake-ups. */
  readonly #subsOf = new Map<string, Set<StoreSubscription>>();
  /** Shared by every queue over this store object: finds which subscriptions have due work. */
  readonly #poller: DuePoller;
  readonly #janitor: Janitor;
  readonly #listenCtl = new AbortController();
  readonly #timer = new WakeTimer((topic) => this.#wake(topic));
  #listening: Promise<void> = Promise.resolve();
  #closed = false;
  /**
   * Set once close has closed the subscriptions: publishes are refused from
   * then on. Until then a running handler's publish (a stage feeding the
   * next) is stored like any other, so a shutdown does not fail it.
   */
  #publishClosed = false;
  #closePromise: Promise<void> | undefined;
  readonly #host: SubscriptionHost;
  /** The last topic a publish found valid: a producer's next message usually names it again. */
  #checkedTopic: string | undefined;
  /** Concurrent publishes share one append (group commit, publish-batcher.ts). */
  readonly #batcher: PublishBatcher<StoredMessage>;
  /** Subscribes under way, which close waits for. */
  readonly #subscribing = new Set<Promise<unknown>>();
  /** Orders registering, removing, pausing and resuming each (topic, group) in this queue. */
  readonly #groupLock = new KeyedLock();
  /** Spans of publishes and handler attempts; `null` when tracing is off (tracing.ts). */
  readonly #tracing: QueueTracing | null;
  /** `schedule`, `unschedule`, `listSchedules`. */
  readonly #schedules: ScheduleOps;
  /** Fires the stored schedules; absent when the store keeps none or `fireSchedules` is off. */
  readonly #scheduler: Scheduler | undefined;

  constructor(store: Store, config?: EngineConfig<T>);
  /** @internal With the scheduler's clock and timings replaced (tests). */
  constructor(store: Store, config: EngineConfig<T> | undefined, internals: EngineInternals);
  constructor(store: Store, config: EngineConfig<T> = {}, internals: EngineInternals = {}) {
    this.#store = store;
    this.#guarded = new GuardedStore(store, this.#stop.signal);
    this.#cfg = resolveEngineConfig(config);
    this.#tracing = QueueTracing.from(this.#cfg.tracing);
    const signals = new QueueSignals(this, this.#cfg.logger, this.#cfg.onError);
    this.#signals = signals;
    const policy = { deadRetentionMs: hoursToMs(this.#cfg.retentionHours), ackedRetentionMs: hoursToMs(this.#cfg.ackedRetentionHours) };
    this.#janitor = new Janitor(this.#guarded, policy, this.#cfg.janitorIntervalMs, randomUUID(), signals.report);
    this.#janitor.start();
    if (store.listen) {
      this.#listening = store
        .listen(this.#listenCtl.signal, (topic) => this.#wake(topic))
        .catch((err) => {
          if (!(err instanceof UnsupportedError)) signals.report(err, 'listen');
        });
    }
    this.#batcher = new PublishBatcher({
      appendShared: (msgs) => this.#guarded.append(msgs),
      appendAlone: (msgs, failed) => (failed === undefined ? this.#appendRetrying(msgs) : this.#retryAppend(msgs, failed)),
      appendNow: store.appendNow ? (msgs) => this.#guarded.appendNow(msgs) : undefined,
      stored: (msgs) => this.#stored(msgs),
      transient: isTransient,
      bytes: payloadBytes,
    });
    this.#poller = DuePoller.of(store);
    this.#host = {
      store,
      poller: this.#poller,
      attempts: this.#attempts,
      onError: signals.report,
      emit: (name, event) => signals.emit(name, event),
      hears: (name) => signals.hears(name),
      appendInternal: (msgs) => this.#append(msgs),
      wake: (topic) => this.#wake(topic),
      wakeAt: (topic, at) => this.#timer.schedule(topic, at),
      forget: (sub) => this.#forget(sub),
      tracing: this.#tracing,
    };
    const clock = internals.clock ?? systemClock;
    if (this.#cfg.fireSchedules && hasSchedules(store)) {
      this.#scheduler = new Scheduler({ store: this.#guarded, publish: (msgs) => this.#append(msgs), clock, onError: signals.report }, internals.scheduleTimings);
      this.#scheduler.start();
    }
    this.#schedules = new ScheduleOps({
      store,
      guarded: this.#guarded,
      clock,
      prepare: (m, now, encode) => this.#prepare(m, now, encode ? this.#cfg.codec : undefined),
      changed: () => this.#scheduler?.wake(),
    });
  }

  /** See `QueueEventEmitter.on`. */
  on<K extends keyof QueueEvents>(event: K, listener: QueueListener<K>): this {
    this.#signals.emitter.on(event, listener as (...args: unknown[]) => void);
    return this;
  }

  /** See `QueueEventEmitter.once`. */
  once<K extends keyof QueueEvents>(event: K, listener: QueueListener<K>): this {
    this.#signals.emitter.once(event, listener as (...args: unknown[]) => void);
    return this;
  }

  /** See `QueueEventEmitter.off`. */
  off<K extends keyof QueueEvents>(event: K, listener: QueueListener<K>): this {
    this.#signals.emitter.off(event, listener as (...args: unknown[]) => void);
    return this;
  }

  #assertOpen(): void {
    if (this.#closed) throw new ClosedError('queue is closed');
  }

  #wake(topic: string): void {
    const subs = this.#subsOf.get(topic);
    if (subs) for (const s of subs) s.wake();
  }

  #forget(sub: StoreSubscription): void {
    this.#subs.delete(sub);
    const subs = this.#subsOf.get(sub.topic);
    if (subs?.delete(sub) && subs.size === 0) this.#subsOf.delete(sub.topic);
  }

  /** Checks one message, encodes its payload with `codec` (if any) and fills in its ID and publish time. */
  #prepare(input: Message<unknown>, now: number, codec: Codec<unknown> | undefined): StoredMessage {
    if (typeof input !== 'object' || input === null) throw new InvalidArgumentError('a message must be an object');
    rejectUnknownKeys('message field', input, MESSAGE_KEYS);
    let m = input as Message;
    if (codec) {
      let payload: unknown;
      try {
        payload = codec.encode(input.payload);
      } catch (err) {
        throw err instanceof CodecError ? err : new CodecError(`codec refused the payload: ${errorText(err)}`, { cause: err });
      }
      if (!(payload instanceof Uint8Array)) throw new CodecError('codec.encode must return a Uint8Array');
      m = { ...input, payload };
    }
    // `undefined` is never a checked topic: before the first valid one, the field stays `undefined` too.
    if (m.topic !== this.#checkedTopic || m.topic === undefined) {
      validateName('topic', m.topic);
      this.#checkedTopic = m.topic;
    }
    if (m.id !== undefined) validateId('id', m.id);
    if (m.key !== undefined) validateId('key', m.key);
    if (!(m.payload instanceof Uint8Array)) throw new InvalidArgumentError('message payload must be a Uint8Array');
    if (m.payload.byteLength > this.#cfg.maxPayloadBytes) {
      throw new PayloadTooLargeError(`payload is ${m.payload.byteLength} bytes, more than ${this.#cfg.maxPayloadBytes}`);
    }
    if (m.publishedAt !== undefined) validateMessageTime('publishedAt', m.publishedAt);
    if (m.headers !== undefined) {
      if (typeof m.headers !== 'object' || m.headers === null || Array.isArray(m.headers)) {
        throw new InvalidArgumentError('message headers must be an object of strings');
      }
      let bytes = 0;
      for (const [k, v] of Object.entries(m.headers)) {
        if (typeof v !== 'string') throw new InvalidArgumentError(`header ${JSON.stringify(k)} is not a string`);
        bytes += Buffer.byteLength(k) + Buffer.byteLength(v);
      }
      if (bytes > MAX_HEADER_BYTES) throw new PayloadTooLargeError(`message headers take ${bytes} bytes (names and values in UTF-8), more than ${MAX_HEADER_BYTES}`);
    }
    if (m.priority !== undefined && m.priority !== 0) {
      if (!Number.isInteger(m.priority) || m.priority < MIN_PRIORITY || m.priority > MAX_PRIORITY) {
        throw new InvalidArgumentError(`priority must be an integer from ${MIN_PRIORITY} to ${MAX_PRIORITY}, got ${shown(m.priority)}`);
      }
      if (this.#store.capabilities?.priority !== true) throw new UnsupportedError(`this queue's store does not order by priority (message priority ${m.priority})`);
    }
    if (m.deliverAt !== undefined) {
      const t = validateMessageTime('deliverAt', m.deliverAt);
      if (t - now > hoursToMs(this.#cfg.retentionHours)) {
        throw new ScheduleTooFarError(`deliverAt ${m.deliverAt.toISOString()} is more than retentionHours (${this.#cfg.retentionHours}) ahead`);
      }
    }
    // Built field by field: a spread copies unknown fields, and deleting one leaves a slow object.
    const out: StoredMessage = { id: m.id ?? uuidV7(now), topic: m.topic, payload: m.payload, publishedAt: m.publishedAt ?? new Date(now) };
    if (m.key !== undefined) out.key = m.key;
    if (m.headers !== undefined) out.headers = m.headers;
    if (m.deliverAt !== undefined) out.deliverAt = m.deliverAt;
    if (m.priority !== undefined && m.priority !== 0) out.priority = m.priority;
    return out;
  }

  /** Appends with concurrent publishes (group commit); `#stored` then wakes local subscribers. */
  #append(msgs: StoredMessage[]): Promise<void> {
    return this.#batcher.append(msgs, undefined);
  }

  /** `msgs` are stored: wakes this queue's subscriptions to their topics, and sets a timer for each one scheduled later. */
  #stored(msgs: StoredMessage[]): void {
    if (msgs.length === 1) this.#wake(msgs[0]!.topic);
    else for (const topic of new Set(msgs.map((m) => m.topic))) this.#wake(topic);
    let now: number | undefined;
    for (const m of msgs) {
      if (m.deliverAt === undefined) continue;
      const at = m.deliverAt.getTime();
      if (at > (now ??= Date.now())) this.#timer.schedule(m.topic, at);
    }
  }

  /** Appends one publish's messages, retrying transient store errors `PUBLISH_RETRIES` times with backoff. */
  #appendRetrying(msgs: StoredMessage[]): Promise<void> {
    // The first try without an async frame of its own: most publishes need no retry.
    return this.#guarded.append(msgs).catch((err: unknown) => this.#retryAppend(msgs, err));
  }

  async #retryAppend(msgs: StoredMessage[], first: unknown): Promise<void> {
    let err = first;
    // Once close has begun no new try starts (on SQLite one may block for the
    // whole busy timeout, past close's deadline): the publish rejects with
    // ClosedError, its messages not stored, as a call close cut short does.
    const closedOut = () => new ClosedError('the queue closed before this publish was stored (a try of it had failed and another would have been made)', { cause: err });
    for (let attempt = 0; ; attempt++) {
      if (attempt >= PUBLISH_RETRIES || !isTransient(err)) throw err;
      if (this.#closed) throw closedOut();
      this.#signals.report(err, 'publish (will retry)');
      const waited = await settledBefore(sleep(PUBLISH_RETRY_BASE_MS * 2 ** attempt), this.#stop.signal);
      if (!waited || this.#closed) throw closedOut();
      try {
        return await this.#guarded.append(msgs);
      } catch (e) {
        err = e;
      }
    }
  }

  /** See `Queue.publish`. */
  publish(...msgs: Message<T>[]): Promise<string[]>;
  publish<U>(...args: [...msgs: Message<U>[], opts: PublishOptions<U>]): Promise<string[]>;
  publish(...args: unknown[]): Promise<string[]> {
    // Not async: the promise a publish returns is the one the batcher settles once it is stored.
    let stored: StoredMessage[];
    try {
      if (this.#publishClosed) throw new ClosedError('queue is closed');
      const codec = takePublishCodec(args, this.#cfg.codec, 'publish');
      const now = Date.now();
      stored = (args as Message<unknown>[]).map((m) => this.#prepare(m, now, codec));
    } catch (err) {
      return Promise.reject(err);
    }
    const ids = stored.map((m) => m.id);
    if (stored.length === 0) return Promise.resolve(ids);
    if (this.#tracing === null) return this.#batcher.append(stored, ids);
    return this.#tracing.publish(stored, () => this.#append(stored)).then(() => ids);
  }

  /** See `Queue.subscribe`. */
  subscribe<U>(topic: string, group: string, handler: Handler<U>, opts: SubscribeOptions<U> & { codec: Codec<U> }): Promise<Subscription>;
  subscribe(topic: string, group: string, handler: Handler<T>, opts?: SubscribeOptions<T>): Promise<Subscription>;
  // The overloads above carry the types.
  async subscribe(topic: string, group: string, handler: Handler<any>, opts?: SubscribeOptions<any>): Promise<Subscription> {
    this.#assertOpen();
    validateName('topic', topic);
    validateName('group', group);
    if (typeof handler !== 'function') throw new InvalidArgumentError('handler must be a function');
    const o = resolveSubscribeOptions(opts);
    if (o.codec === undefined && this.#cfg.codec !== undefined) o.codec = this.#cfg.codec;
    if (o.rateLimit !== undefined && this.#store.capabilities?.rateLimit !== true) {
      throw new UnsupportedError(`this queue's store cannot count a rate limit (subscribe option rateLimit)`);
    }
    if (o.deadLetterTopic !== undefined) {
      validateName('dead-letter topic', o.deadLetterTopic);
      if (o.deadLetterTopic === topic) throw new DeadLetterLoopError(`dead-letter topic ${topic} is the subscribed topic`);
    }
    // A subscribe called before close completes as if it ran first: close
    // waits for it and then closes its subscription, so a group it
    // registered is never left without the subscription the caller was given.
    const pending = this.#groupLock.run(groupKey(topic, group), async () => {
      if (this.#store.canConsume) await raceSignal(this.#stop.signal, Promise.resolve(this.#store.canConsume()));
      await this.#guarded.ensureGroup(topic, group, o.startFrom);
      const sub = new StoreSubscription(this.#host, topic, group, handler, o);
      this.#subs.add(sub);
      let subs = this.#subsOf.get(topic);
      if (!subs) this.#subsOf.set(topic, (subs = new Set()));
      subs.add(sub);
      sub.start();
      return sub;
    });
    this.#subscribing.add(pending);
    try {
      return await pending;
    } finally {
      this.#subscribing.delete(pending);
    }
  }

  /** See `Queue.removeGroup`. */
  async removeGroup(topic: string, group: string): Promise<boolean> {
    this.#assertOpen();
    validateName('topic', topic);
    validateName('group', group);
    const remove = requireStoreOp(this.#store, 'removeGroup');
    return this.#groupLock.run(groupKey(topic, group), async () => {
      for (const s of this.#subs) {
        if (s.topic === topic && s.group === group) throw new InvalidArgumentError(`group ${group} of topic ${topic} has a subscription on this queue: close it first`);
      }
      return raceSignal(this.#stop.signal, remove(topic, group));
    });
  }

  /** See `Queue.listGroups`. */
  async listGroups(topic?: string): Promise<ConsumerGroup[]> {
    this.#assertOpen();
    if (topic !== undefined) validateName('topic', topic);
    return raceSignal(this.#stop.signal, requireStoreOp(this.#store, 'listGroups')(topic));
  }

  /** See `Queue.redrive`. */
  async redrive(deadLetterTopic: string, opts?: RedriveOptions): Promise<RedriveResult> {
    this.#assertOpen();
    return redrive({ store: this.#store, maxPayloadBytes: this.#cfg.maxPayloadBytes, append: (msgs) => this.#append(msgs) }, deadLetterTopic, opts);
  }

  /** See `Queue.listMessages`. */
  async listMessages(topic: string, opts: ListMessagesOptions = {}): Promise<MessagePage> {
    this.#assertOpen();
    validateName('topic', topic);
    rejectUnknownKeys('listMessages option', opts, LIST_MESSAGES_OPTION_KEYS);
    const limit = opts.limit ?? DEFAULT_LIST_LIMIT;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
      throw new InvalidArgumentError(`limit must be an integer from 1 to ${MAX_LIST_LIMIT}, got ${shown(limit)}`);
    }
    const page: { after?: string; limit: number } = { limit };
    if (opts.after !== undefined) {
      if (typeof opts.after !== 'string' || opts.after === '' || opts.after.length > 200) {
        throw new InvalidArgumentError(`after must be the next cursor of a previous page, got ${JSON.stringify(opts.after)}`);
      }
      page.after = opts.after;
    }
    return raceSignal(this.#stop.signal, requireStoreOp(this.#store, 'listMessages')(topic, page));
  }

  /** See `Queue.schedule`. */
  async schedule(name: string, opts: ScheduleOptions<T>): Promise<boolean> {
    this.#assertOpen();
    return this.#schedules.schedule(name, opts);
  }

  /** See `Queue.unschedule`. */
  async unschedule(name: string): Promise<boolean> {
    this.#assertOpen();
    return this.#schedules.unschedule(name);
  }

  /** See `Queue.listSchedules`. */
  async listSchedules(): Promise<ScheduleInfo[]> {
    this.#assertOpen();
    return this.#schedules.list();
  }

  /** See `Queue.stats`. */
  async stats(topic: string, group: string): Promise<QueueStats> {
    this.#assertOpen();
    validateName('topic', topic);
    validateName('group', group);
    const s = await this.#guarded.stats(topic, group);
    return { pending: s.pending, leased: s.leased, dead: s.dead, oldestPendingAgeMs: s.oldestPendingAgeMs, paused: s.paused === true };
  }

  /** See `Queue.pauseGroup`. */
  pauseGroup(topic: string, group: string): Promise<boolean> {
    return this.#setPaused(topic, group, true);
  }

  /** See `Queue.resumeGroup`. */
  resumeGroup(topic: string, group: string): Promise<boolean> {
    return this.#setPaused(topic, group, false);
  }

  async #setPaused(topic: string, group: string, paused: boolean): Promise<boolean> {
    this.#assertOpen();
    validateName('topic', topic);
    validateName('group', group);
    requireStoreOp(this.#store, 'setGroupPaused');
    // In call order with this queue's other calls on the group (subscribe, removeGroup, pause, resume): the last one called wins.
    return this.#groupLock.run(groupKey(topic, group), async () => {
      const registered = await this.#guarded.setGroupPaused(topic, group, paused);
      // This queue's subscriptions of the group claim at once; other instances hear it from the store's wake source or their next poll.
      if (!paused) for (const s of this.#subsOf.get(topic) ?? []) if (s.group === group) s.wake();
      return registered;
    });
  }

  /** See `Queue.ping`. */
  async ping(): Promise<void> {
    this.#assertOpen();
    await this.#guarded.ping();
  }

  /**
   * Runs one janitor pass now (the timer runs them every
   * `janitorIntervalMs`); resolves with the rows removed, 0 when another
   * instance holds the janitor role.
   */
  runJanitor(): Promise<number> {
    this.#assertOpen();
    return this.#janitor.runOnce();
  }

  /** See `Queue.close`. Rejects with the first subscription's close error, after closing everything. */
  close(opts: CloseOptions = {}): Promise<void> {
    try {
      checkCloseOptions(opts);
    } catch (err) {
      return Promise.reject(err);
    }
    this.#closePromise ??= this.#close(opts);
    const leases = [...this.#subs].map((s) => s.leaseDurationMs);
    armCloseDeadline(this.#stop, opts, leases.length > 0 ? Math.max(...leases) : DEFAULT_LEASE_DURATION_MS, this.#closePromise);
    return this.#closePromise;
  }

  /**
   * Stops the scheduler's loop, closes the subscriptions, then waits for
   * the scheduler's round and the schedule calls in flight, closes the
   * janitor, the wake source, the
   * publishes still being written, the poll query in flight (due-poller.ts)
   * and the store. With `timeoutMs` (or
   * `signal`) all of it keeps that one deadline: at the deadline every store
   * call still in flight is given up, so a hung store cannot hold close past
   * it. Without one, each subscription waits its own lease and the rest at
   * most the longest of those (the default lease when there is no
   * subscription). A later `close` call
   * with an earlier deadline brings it forward (armCloseDeadline). Once closed,
   * any call still waiting on the store rejects with `ClosedError`.
   */
  async #close(opts: CloseOptions): Promise<void> {
    this.#closed = true;
    const stop = this.#stop;
    let results: PromiseSettledResult<void>[] = [];
    const schedulerStopped = this.#scheduler?.stop(stop.signal);
    try {
      await settledBefore(Promise.allSettled([...this.#subscribing]), stop.signal);
      const subOpts: CloseOptions = { signal: stop.signal };
      if (opts.timeoutMs !== undefined) subOpts.timeoutMs = opts.timeoutMs;
      results = await Promise.allSettled([...this.#subs].map((s) => s.close(subOpts)));
      this.#publishClosed = true; // the handlers are done: what they published is in the batcher, drained below
      this.#timer.stop();
      await schedulerStopped; // a round in flight publishes and records its ticks, or is cut off at the deadline
      await this.#schedules.idle(stop.signal); // schedule calls made before close reach the store
      await this.#janitor.stop(stop.signal);
      this.#listenCtl.abort();
      await settledBefore(this.#listening, stop.signal);
      await settledBefore(this.#batcher.drain(), stop.signal); // publishes accepted before close are stored
      await settledBefore(this.#poller.idle(), stop.signal); // a poll query of the subscriptions just closed
      const closing = this.#store.close();
      if (!(await settledBefore(closing, stop.signal))) {
        closing.catch((err) => this.#signals.report(err, 'store close'));
      } else {
        await closing;
      }
    } finally {
      this.#publishClosed = true;
      stop.abort(new ClosedError('queue closed')); // a stats, ping or listing still waiting on the store rejects now
    }
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/**
 * Builds a `Queue` on top of `store`, which it then owns and closes from
 * `close()`. Stores outside ferry use this to get the full engine. With
 * `engineConfig.codec` the queue is typed by it (`StoreQueue<T>`); without,
 * payloads are `Uint8Array`. Throws `InvalidArgumentError` for a `store` without
 * the `Store` methods, or a bad config.
 * Bifrost's `NewStoreQueue`.
 */
export function createStoreQueue<T = Uint8Array>(store: Store, engineConfig?: EngineConfig<T>): StoreQueue<T> {
  const missing = STORE_METHODS.filter((m) => typeof (store as unknown as Record<string, unknown> | null)?.[m] !== 'function');
  if (missing.length > 0) throw new InvalidArgumentError(`createStoreQueue needs a Store: ${store === null || typeof store !== 'object' ? shown(store) : 'an object'} lacks ${missing.join(', ')}`);
  return new StoreQueue<T>(store, engineConfig);
}

/** The methods every `Store` has (the optional ones aside). */
const STORE_METHODS = ['ensureGroup', 'append', 'claim', 'ack', 'retry', 'kill', 'extend', 'release', 'purge', 'stats', 'ping', 'close'] as const satisfies readonly (keyof Store)[];
