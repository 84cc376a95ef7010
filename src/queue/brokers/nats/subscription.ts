/**
 * One consumer group's subscription on a JetStream durable pull consumer.
 *
 * - **Claim.** A pull (`fetch`) asks for as many messages as there are free
 *   handler slots plus `prefetch` room; the server counts them against the
 *   consumer's `max_ack_pending` (`maxInFlight`) for every client at once.
 *   When a pull ends (full, or its wait ran out) the next one is made as
 *   soon as a slot is free.
 * - **Attempt.** Handler starts, from the attempt ledger (attempt-ledger.ts)
 *   for a delivery that came back: a message pulled and never started is
 *   not charged. A delivery past `maxAttempts` lost its earlier leases; it
 *   is dead-lettered without running. One that came back without a failure
 *   recorded (its holder crashed or stalled) is *recovered*: it runs alone
 *   (run-alone.ts), so a crash it causes again costs no other handler.
 * - **Lease.** The consumer's `ack_wait` is `leaseDurationMs`; every third of
 *   it each held message gets an in-progress ack (`working()`), which resets
 *   its ack wait. A lease not renewed for a whole `leaseDurationMs` (the
 *   connection was down) is taken as lost: the handler's signal aborts and
 *   its outcome is discarded.
 * - **Outcome.** Success: an ack the server confirms (`ackAck`). Failure: a
 *   negative ack delayed by the engine's equal-jitter backoff. `permanent`,
 *   or the last attempt failing: the dead-letter copy (when the subscription
 *   has a `deadLetterTopic`), then `term`. Negative acks and terms are
 *   confirmed by a round trip to the server (`flush`), not by a reply.
 * - **Close.** No new pull; a pulled message not started yet is given back
 *   with a plain negative ack (JetStream counts that as a delivery); running
 *   handlers get until the deadline, then are aborted and keep their leases.
 */
import type { Consumer, ConsumerMessages, JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { whenAborted } from '../../abortable.js';
import { equalJitterBackoffMs } from '../../../backoff.js';
import type { Codec } from '../../../codecs.js';
import { CodecError, asIOError } from '../../../errors.js';
import { MAX_ERROR_BYTES, deadLetterCopy, errorText } from '../../dead-letter.js';
import { deliveryId } from '../../delivery-id.js';
import { deliveryOf } from '../../delivery-of.js';
import type { DeadLetterReason, QueueSignals } from '../../events.js';
import { checkCloseOptions, type CloseOptions, type ResolvedSubscribeOptions } from '../../options.js';
import { isPermanent } from '../../permanent.js';
import type { Handler, StoredMessage, Subscription } from '../../types.js';
import { AttemptConflict, type AttemptLedger } from './attempt-ledger.js';
import { attemptKey, beginAttempt, markCompleted, superseded, wasCompleted } from './attempts.js';
import { RunAlone } from './run-alone.js';
import { fitEscaped, fromWire } from './wire.js';

/** Longest a pull waits for messages before the next one is made, ms (JetStream's floor is 1000). */
const PULL_EXPIRES_MS = 5000;
/** How long an ack waits for the server's confirmation, ms. */
const ACK_TIMEOUT_MS = 5000;

/** What a subscription needs from its queue. */
export interface NatsSubscriptionHooks {
  readonly nc: NatsConnection;
  readonly signals: QueueSignals;
  /** Whether the connection is up now (an in-progress ack sent while it is down waits in the client and may arrive too late). */
  connected(): boolean;
  /** Stores dead-letter copies (IDs set) on their topic. */
  publishStored(msgs: StoredMessage[]): Promise<void>;
  /** Counts delivery `did` as dead in this subscription's group (idempotent within the duplicate window). */
  recordDead(did: string): Promise<void>;
  /** The attempt ledger of this subscription's group. */
  readonly ledger: AttemptLedger;
  /**
   * Reads the group's consumer. Resolves true when it no longer exists
   * (removed by `removeGroup`, here or elsewhere); when it exists with an
   * ack wait shorter than this subscription's lease (another subscribe
   * raising it at the same time wrote a shorter one last), raises it back
   * and resolves false.
   */
  checkGroup(): Promise<boolean>;
  /** Called once the subscription has closed. */
  forget(sub: NatsSubscription): void;
}

interface Held {
  readonly msg: JsMsg;
  readonly ac: AbortController;
  lastBeat: number;
  lost: boolean;
  /** The attempt number, once the ledger has told it (the delivery count until then). */
  attempt: number;
}

export class NatsSubscription implements Subscription {
  readonly topic: string;
  readonly group: string;
  readonly #consumer: Consumer;
  readonly #host: NatsSubscriptionHooks;
  readonly #handler: Handler<unknown>;
  readonly #opts: ResolvedSubscribeOptions;
  readonly #codec: Codec<unknown> | undefined;
  readonly #held = new Set<Held>();
  /** Handlers run side by side, a recovered delivery alone. */
  readonly #gate = new RunAlone();
  readonly #running = new Set<Promise<void>>();
  /** Acks sent and not yet confirmed. */
  readonly #acking = new Set<Promise<void>>();
  /** Pulled, not started: waiting for a slot. */
  readonly #waiting: JsMsg[] = [];
  #pull: ConsumerMessages | undefined;
  #slotFreed: (() => void) | undefined;
  #closing = false;
  #closePromise: Promise<void> | undefined;
  readonly #beat: NodeJS.Timeout;
  readonly #loop: Promise<void>;

  constructor(topic: string, group: string, consumer: Consumer, handler: Handler<unknown>, opts: ResolvedSubscribeOptions, codec: Codec<unknown> | undefined, host: NatsSubscriptionHooks) {
    this.topic = topic;
    this.group = group;
    this.#consumer = consumer;
    this.#handler = handler;
    this.#opts = opts;
    this.#codec = codec;
    this.#host = host;
    this.#beat = setInterval(() => this.#heartbeat(), Math.max(1, opts.leaseDurationMs / 3));
    this.#beat.unref();
    this.#loop = this.#run();
  }

  async #run(): Promise<void> {
    while (!this.#closing) {
      // Unconfirmed acks beyond one per slot hold slots too, so a slow server is not sent ever more.
      const free = this.#opts.concurrency - this.#running.size - Math.max(0, this.#acking.size - this.#opts.concurrency);
      const room = free + this.#opts.prefetch - this.#waiting.length;
      if (free <= 0 || room <= 0) {
        await new Promise<void>((resolve) => (this.#slotFreed = resolve));
        continue;
      }
      try {
        const pull = await this.#consumer.fetch({ max_messages: Math.min(this.#opts.batchSize, room), expires: PULL_EXPIRES_MS });
        this.#pull = pull;
        if (this.#closing) pull.stop();
        for await (const m of pull) {
          if (this.#closing) {
            m.nak();
            continue;
          }
          this.#waiting.push(m);
          this.#startWaiting();
        }
      } catch (err) {
        if (this.#closing) break;
        // A removed group's consumer is gone, and with it every lease on it.
        if (await this.#host.checkGroup().catch(() => false)) for (const h of this.#held) this.#lose(h, 'heartbeat');
        else this.#report(err, 'claim');
        await new Promise<void>((resolve) => setTimeout(resolve, Math.min(this.#opts.pollIntervalMs, 1000)).unref());
      } finally {
        this.#pull = undefined;
      }
    }
  }

  /** Starts waiting messages while slots are free. */
  #startWaiting(): void {
    while (this.#waiting.length > 0 && this.#running.size < this.#opts.concurrency && !this.#closing) {
      const m = this.#waiting.shift()!;
      const p = this.#attempt(m).finally(() => {
        this.#running.delete(p);
        this.#startWaiting();
        this.#wakeLoop();
      });
      this.#running.add(p);
    }
  }

  /** Set while a heartbeat's check that the group's consumer still exists is out. */
  #checkingGroup = false;

  /** When the group was last checked (performance.now()). */
  #groupCheckedAt = performance.now();

  #heartbeat(): void {
    const now = performance.now();
    // In-progress acks to a deleted consumer are silently dropped: while handlers run, ask once a tick whether the
    // group was removed (by any instance). The same request puts back an ack wait cut below this lease by two
    // subscribes updating it at once; an idle subscription makes it once a lease, so the group's wait settles
    // on the longest lease within one lease of the last subscribe.
    const due = this.#held.size > 0 || now - this.#groupCheckedAt >= this.#opts.leaseDurationMs;
    if (due && !this.#checkingGroup && this.#host.connected()) {
      this.#checkingGroup = true;
      this.#groupCheckedAt = now;
      this.#host.checkGroup().then((gone) => {
        if (gone) for (const h of this.#held) this.#lose(h, 'heartbeat');
      }, () => undefined).finally(() => (this.#checkingGroup = false));
    }
    const connected = this.#host.connected();
    for (const h of this.#held) {
      if (h.lost) continue;
      // This tick came too late (the event loop was blocked): the ack wait may have run out and the server redelivered.
      if (now - h.lastBeat >= this.#opts.leaseDurationMs) {
        this.#lose(h, 'lapse');
        continue;
      }
      if (connected) {
        try {
          h.msg.working();
          h.lastBeat = now;
          continue;
        } catch {
          // not sent: judged below
        }
      }
      if (now - h.lastBeat >= this.#opts.leaseDurationMs) this.#lose(h, 'lapse');
    }
    for (const m of this.#waiting) {
      try {
        m.working();
      } catch {
        // a lapsed wait brings the message back to the group: nothing lost
      }
    }
  }

  /** Reports `err` as the queue's `error` event, as a FerryError (nats.js's own errors have no `code`). */
  #report(err: unknown, op: string): void {
    this.#host.signals.report(asIOError(op, err, { name: 'nats queue' }), op);
  }

  #lose(h: Held, op: 'lapse' | 'ack' | 'heartbeat' | 'claim'): void {
    if (h.lost) return;
    h.lost = true;
    h.ac.abort(new Error(`lease lost (${op})`));
    this.#host.signals.emit('leaseLost', { ...this.#event(h), op });
  }

  #event(h: Held): { topic: string; group: string; deliveryId: string; messageId: string; attempt: number } {
    const m = h.msg;
    const id = m.headers?.get('Nats-Msg-Id') || `seq-${m.seq}`;
    return { topic: this.topic, group: this.group, deliveryId: deliveryId(id, this.group), messageId: id, attempt: h.attempt };
  }

  async #attempt(m: JsMsg): Promise<void> {
    const stored = fromWire(this.topic, m.data, m.headers, m.time, `seq-${m.seq}`);
    const count = m.info.deliveryCount;
    const did = deliveryId(stored.id, this.group);
    const held: Held = { msg: m, ac: new AbortController(), lastBeat: performance.now(), lost: false, attempt: count };
    this.#held.add(held);
    const key = attemptKey(m.info.stream, m.info.consumer, m.info.streamSequence);
    let end: (() => void) | undefined;
    let leave: (() => void) | undefined;
    let handedOff = false;
    try {
      end = await beginAttempt(key, count); // an earlier attempt still running here finishes first; heartbeats keep this lease meanwhile
      if (held.lost) return;
      if (superseded(key, count)) return this.#lose(held, 'claim');
      if (wasCompleted(key)) {
        // Delivered again before the server saw our ack: done already, so acked without running.
        await m.ackAck({ timeout: ACK_TIMEOUT_MS }).catch(() => false);
        return;
      }
      // A first delivery is attempt 1 with no record; one that came back asks the ledger what last started.
      let recordSeq = 0;
      let recovered = false;
      let attempt = 1;
      if (count > 1) {
        let rec;
        try {
          rec = await this.#host.ledger.read(m.seq);
        } catch (err) {
          // Not known: given back unstarted, so no attempt is spent.
          this.#report(err, 'claim');
          m.nak(Math.min(this.#opts.pollIntervalMs, 1000));
          return;
        }
        recordSeq = rec.seq;
        // With no record, the first delivery is taken to have started (and maybe crashed).
        attempt = (rec.seq === 0 ? 1 : rec.attempt) + 1;
        recovered = !rec.failed;
      }
      held.attempt = attempt;
      if (attempt > this.#opts.maxAttempts) {
        const err = new Error(`attempts exhausted: ${this.#opts.maxAttempts} leases lost`);
        await this.#deadLetter(held, stored, did, this.#opts.maxAttempts, 'leases', err, undefined);
        return;
      }
      leave = await this.#gate.enter(recovered, held.ac.signal);
      if (leave === undefined || held.lost) return;
      if (count > 1) {
        try {
          recordSeq = await this.#host.ledger.write(m.seq, attempt, false, recordSeq);
        } catch (err) {
          if (err instanceof AttemptConflict) return this.#lose(held, 'claim');
          this.#report(err, 'claim');
          m.nak(Math.min(this.#opts.pollIntervalMs, 1000));
          return;
        }
      }
      let payload: unknown = stored.payload;
      if (this.#codec) {
        try {
          payload = this.#codec.decode(stored.payload);
        } catch (err) {
          const e = err instanceof CodecError ? err : new CodecError(`codec could not decode the payload: ${errorText(err)}`, { cause: err });
          await this.#deadLetter(held, stored, did, attempt, 'decode', e, undefined);
          return;
        }
      }
      const delivery = deliveryOf(stored, payload, did, this.group, attempt);
      const started = performance.now();
      let failure: { err: unknown } | undefined;
      try {
        await this.#handler(delivery, held.ac.signal);
      } catch (err) {
        failure = { err };
      }
      const durationMs = performance.now() - started;
      // No renewal for a whole lease (a blocked event loop, or the connection down): the server may have redelivered.
      if (!held.lost && performance.now() - held.lastBeat >= this.#opts.leaseDurationMs) this.#lose(held, 'lapse');
      if (!held.lost && superseded(key, count)) this.#lose(held, 'claim');
      if (held.lost || held.ac.signal.aborted) return; // outcome discarded: another consumer may hold it now
      if (!failure) {
        // The slot goes to the next message now; the ack is confirmed in the background, its lease heartbeated until then.
        // Its turn at the gate lasts until the ack is confirmed: a recovered delivery must not crash the process under an ack in flight.
        const finish = end;
        const left = leave;
        end = undefined;
        leave = undefined;
        handedOff = true;
        const p: Promise<void> = this.#ack(held, key, durationMs, count > 1).finally(() => {
          this.#acking.delete(p);
          this.#held.delete(held);
          left();
          finish();
          this.#wakeLoop();
        });
        this.#acking.add(p);
        return;
      }
      const { err } = failure;
      if (isPermanent(err) || attempt >= this.#opts.maxAttempts) {
        await this.#deadLetter(held, stored, did, attempt, isPermanent(err) ? 'permanent' : 'exhausted', err, durationMs);
        return;
      }
      // The failure is recorded first, so the redelivery is known as a retry, not a recovery.
      try {
        await this.#host.ledger.write(m.seq, attempt, true, recordSeq);
      } catch (ledgerErr) {
        if (ledgerErr instanceof AttemptConflict) return this.#lose(held, 'ack');
        this.#report(ledgerErr, 'retry record'); // the redelivery then runs alone: slower, not wrong
      }
      await this.#retry(held, err, durationMs);
    } catch (err) {
      this.#report(err, 'outcome');
    } finally {
      leave?.();
      if (!handedOff) this.#held.delete(held);
      end?.();
    }
  }

  /** Drops the delivery's ledger record in the background (it completed or died). */
  #forget(m: JsMsg): void {
    this.#host.ledger.forget(m.seq).catch((err: unknown) => this.#report(err, 'forget attempts'));
  }

  async #ack(held: Held, key: string, durationMs: number, recorded: boolean): Promise<void> {
    const m = held.msg;
    let ok = false;
    try {
      ok = await m.ackAck({ timeout: ACK_TIMEOUT_MS });
    } catch (err) {
      this.#report(err, 'ack');
    }
    if (ok) {
      markCompleted(key); // a newer attempt already on its way is then acked without running
      if (recorded) this.#forget(m);
      this.#host.signals.emit('completed', { ...this.#event(held), durationMs });
    } else this.#lose(held, 'ack');
  }

  #wakeLoop(): void {
    const wake = this.#slotFreed;
    this.#slotFreed = undefined;
    wake?.();
  }

  async #retry(held: Held, err: unknown, durationMs: number): Promise<void> {
    const m = held.msg;
    const delayMs = Math.round(equalJitterBackoffMs(held.attempt, this.#opts.backoffBaseMs, this.#opts.backoffMaxMs));
    m.nak(delayMs);
    await this.#host.nc.flush();
    this.#host.signals.emit('retrying', { ...this.#event(held), delayMs, error: err, durationMs });
  }

  async #deadLetter(held: Held, stored: StoredMessage, did: string, attempts: number, reason: DeadLetterReason, err: unknown, durationMs: number | undefined): Promise<void> {
    const m = held.msg;
    const dlq = this.#opts.deadLetterTopic;
    if (dlq !== undefined) {
      const claimed = { deliveryId: did, claimToken: '', group: this.group, attempt: held.attempt, message: stored };
      try {
        // Cut so that the escaped error header fits the room kept for it (wire.ts).
        await this.#host.publishStored([deadLetterCopy(claimed, dlq, fitEscaped(errorText(err), MAX_ERROR_BYTES), attempts)]);
      } catch (pubErr) {
        // The copy is not stored: retry instead, as the engine does.
        this.#report(pubErr, 'dead-letter publish');
        await this.#retry(held, err, durationMs ?? 0);
        return;
      }
    }
    try {
      await this.#host.recordDead(did);
    } catch (ledgerErr) {
      // Not counted: retry instead, so no death goes unrecorded.
      this.#report(ledgerErr, 'dead-letter record');
      await this.#retry(held, err, durationMs ?? 0);
      return;
    }
    m.term(); // no reason text: nats-server 2.9 ignores a "+TERM <reason>" ack
    await this.#host.nc.flush();
    if (m.info.deliveryCount > 1) this.#forget(m); // a first delivery has no record
    const ev = { ...this.#event(held), reason, error: err, ...(durationMs !== undefined ? { durationMs } : {}), ...(dlq !== undefined ? { deadLetterTopic: dlq } : {}) };
    this.#host.signals.emit('deadLettered', ev);
  }

  /** See `Subscription.close`. */
  close(opts?: CloseOptions): Promise<void> {
    checkCloseOptions(opts);
    this.#closePromise ??= this.#close(opts);
    return this.#closePromise;
  }

  async #close(opts: CloseOptions | undefined): Promise<void> {
    this.#closing = true;
    this.#pull?.stop();
    const wake = this.#slotFreed;
    this.#slotFreed = undefined;
    wake?.();
    // Given back unstarted: a first delivery gets a record of attempt 0, so its return is not charged an attempt or taken as a recovery.
    const givenBack = this.#waiting.splice(0);
    const records = givenBack.filter((m) => m.info.deliveryCount === 1).map((m) => this.#host.ledger.write(m.seq, 0, true, 0).catch(() => 0));
    for (const m of givenBack) m.nak();
    const timeoutMs = opts?.timeoutMs ?? this.#opts.leaseDurationMs;
    let timer: NodeJS.Timeout | undefined;
    let off: (() => void) | undefined;
    const deadline = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
      // One signal may close every subscription at once: a listener of its own for each would pass Node's limit of 10.
      if (opts?.signal?.aborted) resolve();
      else if (opts?.signal) off = whenAborted(opts.signal, resolve);
    });
    const settled = async () => {
      await Promise.allSettled([...this.#running]);
      await Promise.allSettled([...this.#acking]);
    };
    await Promise.race([settled(), deadline]);
    clearTimeout(timer);
    off?.();
    // Past the deadline: abort what still runs; its leases stay and run out.
    for (const h of this.#held) h.ac.abort(new Error('subscription closed'));
    clearInterval(this.#beat);
    await Promise.race([this.#loop, new Promise((r) => setTimeout(r, 1000).unref())]);
    try {
      if (!this.#host.nc.isClosed()) await Promise.race([Promise.all([this.#host.nc.flush(), ...records]), new Promise((r) => setTimeout(r, 1000).unref())]);
    } catch {
      // the connection is gone; the naks above are lost and those messages come back after their ack wait
    }
    this.#host.forget(this);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
