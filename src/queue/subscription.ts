/**
 * One running consumer of a (topic, group): the poll loop, the worker slots
 * and the outcome of each delivery; its leases are kept by lease-keeper.ts.
 * The life of a subscription is described at the top of engine.ts.
 */
import { randomUUID } from 'node:crypto';
import { ClosedError, CodecError } from '../errors.js';
import { GuardedStore, armCloseDeadline, settledBefore, stopController } from './abortable.js';
import { Attempt, type AttemptRegistry, type LossCause } from './attempt.js';
import { equalJitterBackoffMs } from '../backoff.js';
import { deadLetterCopy, errorText } from './dead-letter.js';
import { deliveryOf } from './delivery-of.js';
import type { DuePoller } from './due-poller.js';
import type { DeadLetterReason, DeliveryEvent, LeaseLostEvent, QueueEvents } from './events.js';
import { takesSignal } from './handler-signal.js';
import { HoldOff, holdOffMs } from './hold-off.js';
import { LeaseKeeper } from './lease-keeper.js';
import { checkCloseOptions, type ErrorReporter, type ResolvedSubscribeOptions } from './options.js';
import { isPermanent } from './permanent.js';
import type { QueueTracing } from './tracing.js';
import type { ClaimRequest, Claimed, CloseOptions, Delivery, Handler, Store, StoredMessage, Subscription } from './types.js';

type Job = Attempt;

/** How long one ack flush may keep the event loop before yielding, ms. */
const ACK_TURN_MS = 2;
/**
 * Acks not yet written, per slot of `concurrency`, past which the poll loop
 * stops claiming until a flush lands: a store slower at acking than the
 * handlers are at finishing would otherwise let leases pile up unbounded.
 */
const UNWRITTEN_ACKS_PER_SLOT = 16;
/** The floor of that backlog, so a small `concurrency` still batches well. */
const UNWRITTEN_ACKS_MIN = 256;
/**
 * How long after `Attempt.expiresBy` (the last claim or renewal reply plus the
 * lease) to wake the topic's subscriptions for a lease left to run out, ms:
 * room for the store's clock to run a little behind ours.
 */
const LEASE_SLACK_MS = 50;

/** How many acks a subscription with `concurrency` slots may have queued or being written before it stops claiming. @internal */
export function maxUnwrittenAcks(concurrency: number): number {
  return Math.max(UNWRITTEN_ACKS_MIN, UNWRITTEN_ACKS_PER_SLOT * concurrency);
}

/**
 * Whether a claim of at most `max` that brought `claimed` may have left more
 * due: it came back full, or was cut short by a delivery claimed alone (its
 * lease had expired).
 */
function mayHaveMore(claimed: readonly Claimed[], max: number): boolean {
  return claimed.length >= max || claimed.some((c) => c.recovered);
}

/** What a subscription needs from the queue that owns it. @internal */
export interface SubscriptionHost {
  readonly store: Store;
  /** Finds which subscriptions of the store have due work, once per poll interval (due-poller.ts). */
  readonly poller: DuePoller;
  /** The newest attempt of each delivery held by any subscription of this queue. */
  readonly attempts: AttemptRegistry;
  readonly onError: ErrorReporter;
  /** Tells listeners, the logger and diagnostics channels about a delivery's outcome. */
  emit<K extends Exclude<keyof QueueEvents, 'error'>>(name: K, event: QueueEvents[K][0]): void;
  /** Whether `emit(name, …)` would reach anyone: per-delivery events are not built for nobody. */
  hears(name: Exclude<keyof QueueEvents, 'error'>): boolean;
  /** Stores messages, retrying transient store errors, and wakes their topics' subscribers. */
  appendInternal(msgs: StoredMessage[]): Promise<void>;
  /** Cuts short the poll wait of every subscription of this queue on `topic`. */
  wake(topic: string): void;
  /** Does the same at local time `at` (ms since the epoch). */
  wakeAt(topic: string, at: number): void;
  /** Called once the subscription has closed. */
  forget(sub: StoreSubscription): void;
  /** Makes the span of each handler attempt; `null` when tracing is off. */
  readonly tracing: QueueTracing | null;
}

/** Why a delivery is being dead-lettered, for the `deadLettered` event. */
interface DeathCause {
  reason: DeadLetterReason;
  error: unknown;
}

/** A subscription of the generic engine. Created by `Queue.subscribe`. */
export class StoreSubscription implements Subscription {
  /** Recorded by the store as the holder of this subscription's leases. */
  readonly runnerId = randomUUID();
  readonly topic: string;
  readonly group: string;
  readonly #host: SubscriptionHost;
  readonly #handler: Handler<unknown>;
  /** Whether the handler can see its second argument; when it cannot, no signal is made for it (handler-signal.ts). */
  readonly #signalled: boolean;
  readonly #o: ResolvedSubscribeOptions;
  /** Aborted when close's deadline passes: every store call still in flight is then given up. */
  readonly #stop = stopController();
  /** The store, its calls cut short by `#stop`. */
  readonly #store: GuardedStore;
  /** Every attempt this subscription holds, their leases renewed by heartbeats. */
  readonly #leases: LeaseKeeper;
  /** Jobs holding a worker slot (the rest of `#leases` wait for a slot under `prefetch`, or for their ack to be written). */
  #running = 0;
  /** Claimed under `prefetch`, not started yet, in claim order. Also in `#leases`, so their leases are renewed. */
  readonly #waiting: Job[] = [];
  /** Acks queued or being written. */
  #unwritten = 0;
  readonly #maxUnwritten: number;
  #closing = false;
  #closePromise: Promise<void> | undefined;
  #loopDone: Promise<void> = Promise.resolve();
  // Poll-loop wake-up: a flag so a wake during a claim is not lost, and the resolver of the current wait.
  #woken = false;
  #wakeWait: (() => void) | undefined;
  #waitingForSlot = false;
  /** The loop claims again in the next turn (its last claim came back full): acks written meanwhile can wait for it. */
  #claimNext = false;
  /** The wait for the rate limit's window to have room (hold-off.ts). */
  readonly #holdOff = new HoldOff();
  /** Removes this subscription from the store's poller. */
  #unpoll: (() => void) | undefined;
  /**
   * Recovered deliveries (their last lease ran out with no outcome: their
   * holder may have crashed because of them) held by this subscription. Each
   * runs alone: it starts once no other handler runs, nothing starts beside
   * it (`#alone`), and nothing is claimed until all are done, so a crash one
   * causes again spends no other delivery's attempt.
   */
  readonly #recovered = new Set<Job>();
  /** The recovered delivery that started and is not done (its handler runs, or its outcome is being written): nothing starts beside it. */
  #alone: Job | undefined;
  /** Claims in flight, and the most deliveries they may bring (room they hold). */
  #claiming = 0;
  #claimingRoom = 0;
  /** Whether claims may overlap at all (see `#loop`): the store can, and nothing counts what the claim before leased. */
  readonly #canOverlap: boolean;
  /** Claims started without waiting for them: close waits for them. */
  readonly #overlapped = new Set<Promise<void>>();
  /** The last claim brought a full batch and nothing recovered: there is likely more. */
  #flowing = false;
  /** What an overlapped claim that landed asks of the loop: nothing, a wait for a wake-up (it found the work drained), or a poll interval's pause (it failed). */
  #landed: 'more' | 'drained' | 'failed' = 'more';
  // Acks completed in the same turn of the event loop go to the store together.
  #acks: Array<{ job: Job; resolve: () => void }> = [];
  #ackFlushScheduled = false;
  #releaseError: unknown;

  /** The lease length this subscription claims with, ms. @internal */
  get leaseDurationMs(): number {
    return this.#o.leaseDurationMs;
  }

  /** @internal */
  constructor(host: SubscriptionHost, topic: string, group: string, handler: Handler<unknown>, opts: ResolvedSubscribeOptions) {
    this.#host = host;
    this.topic = topic;
    this.group = group;
    this.#handler = handler;
    this.#signalled = takesSignal(handler);
    this.#o = opts;
    this.#maxUnwritten = maxUnwrittenAcks(opts.concurrency);
    this.#canOverlap = opts.prefetch > 0 && opts.maxInFlight === 0 && opts.rateLimit === undefined && host.store.capabilities?.overlappingClaims === true;
    this.#store = new GuardedStore(host.store, this.#stop.signal);
    this.#leases = new LeaseKeeper({
      store: this.#store, leaseMs: opts.leaseDurationMs, stopped: this.#stop.signal, onError: host.onError, lose: (j, cause) => this.#lose(j, cause),
    });
  }

  /** Starts polling and heartbeating. @internal */
  start(): void {
    this.#leases.start();
    // Between claims that find work, the shared poller wakes the loop when
    // the store reports due work for this (topic, group).
    this.#unpoll = this.#host.poller.register({
      topic: this.topic, group: this.group, intervalMs: this.#o.pollIntervalMs, wake: () => this.wake(), report: this.#host.onError,
    });
    this.#loopDone = this.#loop().catch((err) => this.#host.onError(err, 'subscription loop'));
  }

  /** Cuts the current poll wait short (something may have become claimable, or a slot freed up). @internal */
  wake(): void {
    this.#woken = true;
    const w = this.#wakeWait;
    this.#wakeWait = undefined;
    w?.();
  }

  #wait(ms: number | undefined): Promise<void> {
    if (this.#woken || this.#closing) {
      this.#woken = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const timer = ms === undefined ? undefined : setTimeout(() => this.wake(), ms);
      this.#wakeWait = () => {
        if (timer) clearTimeout(timer);
        this.#woken = false;
        resolve();
      };
    });
  }

  /**
   * Claims while there is room. On a store with `overlappingClaims`, a
   * subscription that claims ahead (`prefetch`) keeps a second claim in
   * flight while work flows (each claim brings a full batch): the store
   * works on one while this process handles the other's deliveries. Such
   * claims are not awaited here; each tells the loop how it landed.
   */
  async #loop(): Promise<void> {
    const o = this.#o;
    const store = this.#store;
    try {
      while (!this.#closing) {
        // Room for claims: free slots, plus what `prefetch` lets wait for
        // one, less what the claims in flight may bring. With prefetch the
        // loop claims again only once the waiting list has drained to half,
        // so claims stay large rather than one per freed slot.
        const room = o.concurrency - this.#running + o.prefetch - this.#waiting.length - this.#claimingRoom;
        const overlap = this.#flowing && this.#canOverlap;
        const blocked = room <= 0 || this.#waiting.length > o.prefetch / 2 || this.#unwritten >= this.#maxUnwritten || this.#recovered.size > 0;
        if (blocked || (this.#claiming > 0 && (!overlap || this.#claiming >= 2 || room < Math.min(o.batchSize, (o.concurrency + o.prefetch) / 2)))) {
          // A freed slot or a claim landing wakes the loop.
          this.#waitingForSlot = true;
          await this.#wait(undefined);
          this.#waitingForSlot = false;
          continue;
        }
        if (this.#landed !== 'more') {
          // An overlapped claim found nothing more, or failed: as for a claim awaited here.
          const landed = this.#landed;
          this.#landed = 'more';
          await this.#wait(landed === 'failed' ? o.pollIntervalMs : undefined);
          continue;
        }
        const max = Math.min(o.batchSize, room);
        const leaseStart = Date.now();
        // A lease that lapsed is given up before claiming, so a claim that
        // brings its delivery back finds the old attempt already aborted.
        this.#leases.giveUpLapsed(leaseStart);
        const req: ClaimRequest = { topic: this.topic, group: this.group, runnerId: this.runnerId, max, leaseMs: o.leaseDurationMs, maxInFlight: o.maxInFlight };
        // When the store says the rate limit cut this claim short, and when the window has room again.
        let limitedForMs: number | undefined;
        if (o.rateLimit !== undefined) {
          req.rateLimit = o.rateLimit;
          req.onRateLimited = (waitMs) => void (limitedForMs = waitMs);
        }
        // Acks waiting to be written go in the claim's own transaction when the store can (`#flushAcks`).
        const acks = store.inner.ackAndClaim === undefined ? [] : this.#takeAcks();
        if (overlap) {
          const landing = this.#claim(req, acks, leaseStart)
            .then((got) => {
              // The newest landing decides; a loop waiting for it wakes.
              this.#landed = got === undefined ? 'failed' : mayHaveMore(got, max) ? 'more' : 'drained';
              if (this.#wakeWait !== undefined) this.wake();
            })
            .catch((err) => this.#host.onError(err, 'claim'))
            .finally(() => this.#overlapped.delete(landing));
          this.#overlapped.add(landing);
          continue;
        }
        const claimed = await this.#claim(req, acks, leaseStart);
        if (claimed === undefined) {
          if (this.#stop.signal.aborted) break;
          await this.#wait(o.pollIntervalMs);
          continue;
        }
        if (this.#closing) break;
        if (limitedForMs !== undefined) {
          // Nothing more can start before the window has room, whatever wakes
          // the loop: claim again then (a store that cannot say when leaves it
          // to the poller, as for any short claim).
          await this.#holdOff.wait(holdOffMs(limitedForMs, o.rateLimit!));
          this.#woken = false; // the next claim sees what the wake-ups heard meanwhile announced
          continue;
        }
        if (mayHaveMore(claimed, max)) {
          // Poll again at once, but after letting timers and I/O run (a
          // synchronous store never yields).
          this.#claimNext = true;
          await new Promise<void>((resolve) => setImmediate(resolve));
          this.#claimNext = false;
          continue;
        }
        // Nothing more is due (or the group is paused): sleep until a wake-up
        // (the poller's included; it leaves a paused group out, and resuming
        // wakes this queue's subscriptions of the group).
        await this.#wait(undefined);
      }
    } finally {
      // Overlapped claims land (and give back what they brought, as the subscription is closing).
      while (this.#overlapped.size > 0) await Promise.all(this.#overlapped);
    }
  }

  /**
   * One claim (with `acks` written in its transaction), its deliveries
   * queued for the worker slots; resolves with them, or undefined when it
   * failed (reported). While the subscription is closing, what it brought is
   * given back and it resolves with nothing.
   */
  async #claim(req: ClaimRequest, acks: Array<{ job: Job; resolve: () => void }>, leaseStart: number): Promise<Claimed[] | undefined> {
    const o = this.#o;
    this.#claiming++;
    this.#claimingRoom += req.max;
    let claimed: Claimed[];
    try {
      if (acks.length === 0) claimed = await this.#store.claim(req);
      else {
        const r = await this.#store.ackAndClaim(acks.map((a) => a.job.c), req);
        this.#settleAcks(acks, new Set(r.acked), true);
        claimed = r.claimed;
      }
    } catch (err) {
      this.#flowing = false;
      if (acks.length > 0) this.#settleAcks(acks, undefined, true, err); // reports it
      else if (!this.#stop.signal.aborted) this.#host.onError(err, 'claim');
      return undefined;
    } finally {
      this.#claiming--;
      this.#claimingRoom -= req.max;
    }
    this.#flowing = claimed.length >= req.max && !claimed.some((c) => c.recovered);
    if (this.#closing) {
      await this.#releaseUnstarted(claimed);
      return [];
    }
    // The store started each lease between sending the claim and its reply.
    const replyAt = Date.now();
    for (const c of claimed) this.#enqueue(c, leaseStart + o.leaseDurationMs, replyAt + o.leaseDurationMs);
    this.#pump();
    return claimed;
  }

  async #releaseUnstarted(claimed: Claimed[]): Promise<void> {
    if (claimed.length === 0) return;
    try {
      await this.#store.release(claimed);
      this.#host.wake(this.topic); // claimable again at once, by another subscription of this queue too
    } catch (err) {
      if (this.#stop.signal.aborted) return; // close's deadline passed: the leases run out by themselves
      this.#releaseError ??= err;
      this.#host.onError(err, 'release');
    }
  }

  #enqueue(c: Claimed, deadline: number, expiresBy: number): void {
    const job = new Attempt(c, deadline, expiresBy, (a, cause) => this.#lose(a, cause));
    this.#leases.add(job);
    this.#host.attempts.add(job); // gives up an older attempt of the same delivery, if this queue still holds one
    if (c.recovered) this.#recovered.add(job);
    this.#waiting.push(job);
  }

  /** Forgets a job: it holds nothing any more. */
  #drop(job: Job): void {
    this.#leases.remove(job);
    this.#host.attempts.remove(job);
    if (this.#alone === job) {
      // Its outcome is written: what waited behind it may start.
      this.#alone = undefined;
      this.#pump();
    }
    if (this.#recovered.delete(job) && this.#recovered.size === 0 && !this.#closing) this.wake(); // claiming resumes
  }

  /**
   * Starts waiting deliveries while slots are free. One whose lease lapsed
   * while it waited is dropped unrun: it comes back to whoever claims it
   * next. A recovered one waits until no other handler runs, and nothing
   * starts beside it until it is done (`#alone`).
   */
  #pump(): void {
    while (!this.#closing && this.#running < this.#o.concurrency && this.#waiting.length > 0) {
      const job = this.#waiting[0]!;
      if (job.state === 'lost' || job.deadline <= Date.now()) {
        // Its lease may be gone already (the claim's answer came late, or it
        // waited past its deadline): never start a handler on it.
        this.#waiting.shift();
        this.#lose(job, 'lapse');
        this.#drop(job);
        continue;
      }
      if (this.#alone !== undefined) return;
      const recovered = this.#recovered.has(job);
      if (recovered && this.#running > 0) return;
      this.#waiting.shift();
      this.#start(job);
      if (recovered) {
        this.#alone = job;
        return;
      }
    }
  }

  #start(job: Job): void {
    job.slot = true;
    this.#running++;
    job.done = this.#run(job);
  }

  /**
   * Gives the job's worker slot to the next delivery. A successful handler
   * lets go of it as soon as it returns, before its ack is written: the lease
   * stays held in the store (so `maxInFlight` still counts it) and heartbeats
   * keep renewing it until the ack lands.
   */
  #freeSlot(job: Job): void {
    if (!job.slot) return;
    job.slot = false;
    this.#running--;
    this.#pump();
    if (!this.#closing && this.#waitingForSlot) this.wake();
  }

  /**
   * Runs `job` (`#attempt`), reports what it throws, then frees its slot and
   * forgets it; settles after that. (A try/finally here, not `.catch` and
   * `.finally` on its promise: those cost two more promises per delivery.)
   */
  async #run(job: Job): Promise<void> {
    try {
      await this.#attempt(job);
    } catch (err) {
      this.#host.onError(err, 'delivery');
    } finally {
      this.#freeSlot(job);
      this.#drop(job);
    }
  }

  /** Runs one delivery to its outcome: ack, retry or dead letter; settles once that is written. */
  async #attempt(job: Job): Promise<void> {
    const { c } = job;
    if (job.after !== undefined) {
      // An older attempt of this delivery, given up when this claim came
      // back, may still be running: never run the same delivery twice at once.
      await job.after;
      if (job.discarded) return;
    }
    if (c.attempt > this.#o.maxAttempts) {
      // Its earlier leases were all lost (crashes, stalls): do not run it
      // again. This claim ran nothing, so it does not count as an attempt.
      const ran = c.attempt - 1;
      const text = `attempts exhausted: ${ran} attempts, the last ones lost their leases`;
      await this.#deadLetter(job, text, { reason: 'leases', error: new Error(text) }, ran);
      return;
    }
    const tracing = this.#host.tracing;
    const span = tracing === null ? null : tracing.startProcess(c, this.topic, this.group);
    let payload: unknown = c.message.payload;
    const codec = this.#o.codec;
    if (codec) {
      try {
        payload = codec.decode(c.message.payload);
        if (typeof (payload as PromiseLike<unknown> | null)?.then === 'function') {
          void Promise.resolve(payload).catch(() => undefined); // a rejecting promise must not go unhandled
          throw new CodecError('codec.decode must return the value, not a promise');
        }
      } catch (err) {
        // Decoding again would fail again: dead-letter it without running the handler.
        const e = err instanceof CodecError ? err : new CodecError(`payload of message ${c.message.id} could not be decoded: ${errorText(err)}`, { cause: err });
        span?.end('dead_letter', e, 'decode');
        await this.#deadLetter(job, errorText(e), { reason: 'decode', error: e });
        return;
      }
    }
    const delivery = deliveryOf(c.message, payload, c.deliveryId, c.group, c.attempt);
    let failed = false;
    let failure: unknown;
    const started = performance.now();
    try {
      // Traced, the handler runs in its span's context: the spans it starts
      // are children of it. Called inside the try, so a throw before its
      // first await counts as its failure too.
      await (span === null ? this.#call(delivery, job) : span.run(() => this.#call(delivery, job)));
    } catch (err) {
      failed = true;
      failure = err;
    }
    job.durationMs = performance.now() - started;
    if (job.discarded) {
      span?.end('discard');
      return; // another consumer may own it now: write nothing
    }
    if (!failed) {
      span?.end('ack');
      this.#freeSlot(job);
      await this.#ack(job);
      return;
    }
    const text = errorText(failure);
    const death = isPermanent(failure) ? 'permanent' : c.attempt >= this.#o.maxAttempts ? 'exhausted' : undefined;
    span?.end(death === undefined ? 'retry' : 'dead_letter', failure, death);
    if (death !== undefined) await this.#deadLetter(job, text, { reason: death, error: failure });
    else await this.#retry(job, text, failure);
  }

  /** The handler on `delivery`, with `job`'s signal unless it cannot see one. */
  #call(delivery: Delivery<unknown>, job: Job): Promise<void> {
    return this.#signalled ? this.#handler(delivery, job.ctrl.signal) : (this.#handler as (d: Delivery<unknown>) => Promise<void>)(delivery);
  }

  /**
   * The fields every delivery event has, as a new object literal: an event's
   * own fields are added with `Object.assign`, since a spread followed by new
   * fields cost about 5 µs per object on Node 20 (delivery-of.ts).
   */
  #describe(c: Claimed): DeliveryEvent {
    return { topic: this.topic, group: this.group, deliveryId: c.deliveryId, messageId: c.message.id, attempt: c.attempt };
  }

  #leaseLost(job: Job, op: LeaseLostEvent['op']): void {
    this.#host.emit('leaseLost', Object.assign(this.#describe(job.c), { op }));
  }

  #ack(job: Job): Promise<void> {
    this.#unwritten++;
    return new Promise<void>((resolve) => {
      this.#acks.push({ job, resolve });
      if (this.#ackFlushScheduled) return;
      this.#ackFlushScheduled = true;
      setImmediate(() => void this.#flushAcks());
    });
  }

  /**
   * Writes the acks gathered so far, one store call per batch. After
   * `ACK_TURN_MS` the rest wait for the next turn of the event loop, so a busy
   * subscription on a synchronous store cannot chain claims and acks in
   * microtasks forever and starve the timers (heartbeats above all).
   *
   * When the store has `ackAndClaim`, the poll loop sits idle between
   * polls (or claims again in the next turn) and the acks can make
   * something claimable (a keyed one frees its lane; under `maxInFlight` any
   * frees room), the acks are handed to the loop instead: it (wakes and)
   * writes them in its next claim's transaction,
   * so one commit both completes a delivery and claims the next (on one key
   * lane, the one its ack frees). Other acks are written here: waking the
   * loop for them would add a claim that finds nothing to every ack. What
   * the loop leaves (it stopped for a slot, or the subscription is closing)
   * is written here in the next turn.
   */
  async #flushAcks(): Promise<void> {
    // The loop claims next when it sits idle between polls, or has a claim
    // due in the next turn: which of that turn's callbacks runs first (this
    // flush, or the loop's) is an accident of timing.
    const loopClaimsNext = this.#claimNext || (this.#wakeWait !== undefined && !this.#waitingForSlot);
    if (
      this.#acks.length > 0 && this.#store.inner.ackAndClaim !== undefined && loopClaimsNext && !this.#closing &&
      (this.#o.maxInFlight > 0 || this.#acks.some((a) => a.job.c.message.key !== undefined))
    ) {
      if (!this.#claimNext) this.wake();
      setImmediate(() => void this.#flushAcks());
      return;
    }
    const turnStart = performance.now();
    while (this.#acks.length > 0 && performance.now() - turnStart < ACK_TURN_MS) {
      const batch = this.#takeAcks();
      let held: Set<string> | undefined;
      let error: unknown;
      try {
        // Deliveries not reported held had lost their lease; whoever holds them now will finish them.
        held = new Set(await this.#store.ack(batch.map((a) => a.job.c)));
      } catch (err) {
        error = err;
      }
      this.#settleAcks(batch, held, false, error);
    }
    if (this.#acks.length > 0) setImmediate(() => void this.#flushAcks());
    else this.#ackFlushScheduled = false;
  }

  /** Takes the acks waiting to be written, marking their jobs as being written. */
  #takeAcks(): Array<{ job: Job; resolve: () => void }> {
    const batch = this.#acks.splice(0);
    for (const a of batch) a.job.startWriting();
    return batch;
  }

  /**
   * Reports the outcome of writing `batch`: `held` the IDs the store
   * completed, undefined when the write failed with `error`. `claimed` when
   * the poll loop wrote them with its claim, which already saw what they freed.
   */
  #settleAcks(batch: Array<{ job: Job; resolve: () => void }>, held: Set<string> | undefined, claimed: boolean, error?: unknown): void {
    // The leases run out and the deliveries come back: at least once.
    if (held === undefined && !this.#stop.signal.aborted) this.#host.onError(error, 'ack');
    if (held) {
      const heard = this.#host.hears('completed');
      for (const { job } of batch) {
        if (held.has(job.c.deliveryId)) {
          if (heard) this.#host.emit('completed', Object.assign(this.#describe(job.c), { durationMs: job.durationMs ?? 0 }));
        } else if (job.state !== 'lost') {
          // Marked lost, so a claim of the same call that took the delivery back reports no second loss.
          job.state = 'lost';
          this.#leaseLost(job, 'ack');
        }
      }
    }
    const wasFull = this.#unwritten >= this.#maxUnwritten;
    this.#unwritten -= batch.length;
    for (const a of batch) a.resolve();
    // A written ack may have made more claimable: the next message of a key
    // lane or a freed lease under maxInFlight (for every subscription of
    // this queue on the topic; the store's wake source tells other
    // instances), or room in a backlog that held this poll loop back. The
    // poll loop that wrote them with its claim needs no wake for them.
    const woken = this.#woken;
    if (this.#o.maxInFlight > 0 || batch.some((a) => a.job.c.message.key !== undefined)) this.#host.wake(this.topic);
    else if (wasFull && !this.#closing) this.wake();
    if (claimed) this.#woken = woken;
  }

  /** Writes a retry, and wakes the topic's subscriptions when its backoff ends. */
  async #retry(job: Job, text: string, error: unknown): Promise<void> {
    const o = this.#o;
    const delayMs = equalJitterBackoffMs(job.c.attempt, o.backoffBaseMs, o.backoffMaxMs);
    let held: boolean;
    job.startWriting();
    try {
      held = await this.#store.retry(job.c, delayMs, text);
      if (held) this.#host.wakeAt(this.topic, Date.now() + delayMs);
    } catch (err) {
      if (!this.#stop.signal.aborted) this.#host.onError(err, 'retry');
      return;
    }
    if (held) this.#host.emit('retrying', Object.assign(this.#describe(job.c), { delayMs, error, durationMs: job.durationMs ?? 0 }));
    else if (job.state !== 'lost') this.#leaseLost(job, 'retry');
  }

  /**
   * Publishes the dead-letter copy (when configured), then kills the
   * delivery. `ran` is the number of attempts that ran: `c.attempt`, or one
   * less when this claim was taken only to dead-letter it.
   */
  async #deadLetter(job: Job, text: string, cause: DeathCause, ran = job.c.attempt): Promise<void> {
    const dlq = this.#o.deadLetterTopic;
    if (dlq !== undefined) {
      try {
        await this.#host.appendInternal([deadLetterCopy(job.c, dlq, text, ran)]);
      } catch (err) {
        // Without its copy the delivery must not die: retry it. The copy's ID is
        // the delivery's, so a later successful attempt stores exactly one copy.
        this.#host.onError(err, 'dead-letter publish');
        await this.#retry(job, text, cause.error);
        return;
      }
    }
    let held: boolean;
    job.startWriting();
    try {
      held = await this.#store.kill(job.c, text, ran < job.c.attempt ? { unrun: true } : undefined);
      // A dead head lets its key lane move on; a dead lease frees room under maxInFlight.
      if (held && (job.c.message.key !== undefined || this.#o.maxInFlight > 0)) this.#host.wake(this.topic);
    } catch (err) {
      if (!this.#stop.signal.aborted) this.#host.onError(err, 'kill');
      return;
    }
    if (held) {
      // The attempts that ran: one less than the claim's when it was claimed only to die.
      const event: QueueEvents['deadLettered'][0] = Object.assign(this.#describe(job.c), { attempt: ran, reason: cause.reason, error: cause.error });
      if (job.durationMs !== undefined) event.durationMs = job.durationMs;
      if (dlq !== undefined) event.deadLetterTopic = dlq;
      this.#host.emit('deadLettered', event);
    } else if (job.state !== 'lost') this.#leaseLost(job, 'kill');
  }

  /**
   * Gives up a job whose lease is gone: its handler's signal aborts and its
   * outcome will be discarded. `lapse`: gone because no renewal was
   * confirmed for a whole lease, so the store still holds it until about its
   * deadline; the topic's subscriptions are woken once it has surely run out.
   * A job superseded by a newer claim (`claim`) comes back through that claim.
   */
  #lose(job: Job, cause: LossCause): void {
    if (job.discarded) return;
    job.state = 'lost';
    job.ctrl.abort(new Error(`lease on delivery ${job.c.deliveryId} was lost (${cause})`));
    if (cause === 'lapse') this.#host.wakeAt(this.topic, job.expiresBy + LEASE_SLACK_MS);
    this.#leaseLost(job, cause);
  }

  close(opts: CloseOptions = {}): Promise<void> {
    try {
      checkCloseOptions(opts);
    } catch (err) {
      return Promise.reject(err);
    }
    this.#closePromise ??= this.#close();
    armCloseDeadline(this.#stop, opts, this.#o.leaseDurationMs, this.#closePromise);
    return this.#closePromise;
  }

  /**
   * Stops claiming, then waits until the deadline (`timeoutMs`, default the
   * lease; or `signal`) for running handlers and the writes of their
   * outcomes, while prefetched deliveries are released. At the deadline every
   * store call still in flight is given up (`#stop`), so a hung store cannot
   * hold close past it; handlers still running are aborted and keep their
   * leases, which run out by themselves.
   */
  async #close(): Promise<void> {
    this.#closing = true;
    this.#unpoll?.();
    this.wake();
    this.#holdOff.end();
    const stop = this.#stop; // aborted at the earliest deadline of the close calls (armCloseDeadline)
    try {
      await this.#loopDone; // a claim in flight is cut short at the deadline
      // Prefetched deliveries never started: give them back without spending an attempt.
      const unstarted = this.#waiting.splice(0);
      for (const j of unstarted) this.#drop(j);
      const releasing = this.#releaseUnstarted(unstarted.filter((j) => j.state !== 'lost').map((j) => j.c));
      const running = [...this.#leases.attempts()].map((j) => j.done);
      const finished = await settledBefore(Promise.all([releasing, ...running]), stop.signal);
      if (!finished) {
        for (const j of this.#leases.attempts()) {
          j.state = 'abandoned';
          j.ctrl.abort(new ClosedError('subscription closed before the handler finished'));
          // Its lease is kept: other subscriptions of this queue may take it once it runs out.
          this.#host.wakeAt(this.topic, j.expiresBy + LEASE_SLACK_MS);
        }
        stop.abort(new ClosedError('close deadline passed'));
      }
      await this.#leases.stop();
    } finally {
      stop.abort(new ClosedError('subscription closed')); // nothing of it may stay pending
    }
    // Abandoned attempts stay registered until their handlers return: a
    // later claim of the same delivery in this queue waits for them.
    this.#host.forget(this);
    if (this.#releaseError !== undefined) throw this.#releaseError;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
