/**
 * A `Queue` implemented directly over NATS JetStream (not the Store SPI):
 * one stream per topic (see config.ts for why), one durable pull consumer
 * per consumer group. Built by `type: 'nats'` in the registry; this module
 * and the NATS client are loaded only then.
 *
 * What JetStream cannot promise is refused with `UnsupportedError` rather
 * than done more weakly: message keys (per-key strict order under retries),
 * `deliverAt`, non-zero priorities, `rateLimit`, pausing groups (servers
 * before 2.11 have no consumer pause) and schedules. docs/QUEUE.md has the
 * whole mapping.
 */
import { readFile } from 'node:fs/promises';
import { AckPolicy, DeliverPolicy, DiscardPolicy, JetStreamApiError, RetentionPolicy, StorageType, jetstream, jetstreamManager, type ConsumerConfig, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { connect, credsAuthenticator, nanos, type NatsConnection, type NodeConnectionOptions } from '@nats-io/transport-node';
import type { Codec } from '../../../codecs.js';
import { ClosedError, CodecError, type FerryError, DeadLetterLoopError, IOError, InvalidArgumentError, PayloadTooLargeError, UnsupportedError, asIOError } from '../../../errors.js';
import { knownKeys, rejectUnknownKeys } from '../../../known-keys.js';
import { whenAborted } from '../../abortable.js';
import { KeyedLock, groupKey } from '../../admin.js';
import { errorText } from '../../dead-letter.js';
import { QueueSignals, type ErrorReporter, type QueueEvents, type QueueListener, type QueueLogger } from '../../events.js';
import { uuidV7 } from '../../message-id.js';
import { validateId, validateMessageTime, validateName } from '../../names.js';
import { checkCloseOptions, checkCodec, resolveSubscribeOptions, takePublishCodec, type CloseOptions, type SubscribeOptions } from '../../options.js';
import { redrive } from '../../redrive.js';
import type { ScheduleInfo, ScheduleOptions } from '../../schedules/types.js';
import type { ConsumerGroup, Handler, ListMessagesOptions, Message, MessagePage, PublishOptions, Queue, QueueStats, RedriveOptions, RedriveResult, Store, StoredMessage, Subscription } from '../../types.js';
import { MESSAGE_KEYS } from '../../types.js';
import { AttemptLedger, attemptLedgerGroupFilter, attemptLedgerStream, attemptLedgerSubjects } from './attempt-ledger.js';
import type { ResolvedNatsConfig } from './config.js';
import { deadLedgerStream, deadLedgerSubject, durableName, streamName, subjectOf, topicOfStream, unescapeName } from './names.js';
import { NatsSubscription } from './subscription.js';
import { MAX_CALLER_HEADER_BYTES, checkHeaderNames, fromWire, headerBytes, toHeaders } from './wire.js';

/** The engine settings a nats queue takes from `deps`. */
export interface NatsQueueSettings {
  codec?: Codec<unknown>;
  onError?: ErrorReporter;
  logger?: QueueLogger;
}

/** Longest `close` waits for the connection to close, ms: a dead server must not hang it. */
const CONNECTION_CLOSE_MS = 2000;
const LIST_MESSAGES_OPTION_KEYS = knownKeys<ListMessagesOptions>({ after: true, limit: true });
const SOURCE = { name: 'nats queue' };

function isNotFound(err: unknown): boolean {
  return err instanceof JetStreamApiError && (err.code === 10059 || err.code === 10014 || err.status === 404);
}

/** Bytes of a NATS message kept below the server's `max_payload` for its headers (ferry's own, the caller's, a dead-letter copy's six). */
export const NATS_HEADER_ROOM = 8192;

/** Opens the connection `cfg` describes and builds the queue on it. Rejects with an `IOError` when no server answers. */
export async function openNatsQueue(cfg: ResolvedNatsConfig, settings: NatsQueueSettings = {}): Promise<NatsQueue<unknown>> {
  const opts: NodeConnectionOptions = { servers: cfg.servers, name: cfg.name, maxReconnectAttempts: -1, reconnectTimeWait: 250 };
  if (cfg.user !== undefined) opts.user = cfg.user;
  if (cfg.password !== undefined) opts.pass = cfg.password;
  if (cfg.token !== undefined) opts.token = cfg.token;
  if (cfg.credsFile !== undefined) {
    let creds: Uint8Array;
    try {
      creds = await readFile(cfg.credsFile);
    } catch (err) {
      throw new IOError(`nats queue config: cannot read credsFile ${JSON.stringify(cfg.credsFile)}: ${(err as Error).message}`, { cause: err, transient: false });
    }
    opts.authenticator = credsAuthenticator(creds);
  }
  let nc: NatsConnection;
  try {
    nc = await connect(opts);
  } catch (err) {
    throw asIOError(`connect to ${cfg.servers.join(', ')}`, err, SOURCE);
  }
  const serverMax = nc.info?.max_payload ?? 1 << 20;
  const room = serverMax - NATS_HEADER_ROOM;
  if (cfg.maxPayloadBytes !== undefined && cfg.maxPayloadBytes > room) {
    await nc.close().catch(() => undefined);
    throw new InvalidArgumentError(`nats queue config: maxPayloadBytes ${cfg.maxPayloadBytes} leaves no room for headers under the server's max_payload of ${serverMax} bytes (at most ${room})`);
  }
  try {
    const jsm = await jetstreamManager(nc);
    return new NatsQueue(nc, jsm, { ...cfg, maxPayloadBytes: cfg.maxPayloadBytes ?? Math.min(1 << 20, room) }, settings);
  } catch (err) {
    await nc.close().catch(() => undefined);
    throw asIOError('open JetStream (is the server started with -js?)', err, SOURCE);
  }
}

export class NatsQueue<T = Uint8Array> implements Queue<T> {
  readonly #nc: NatsConnection;
  readonly #jsm: JetStreamManager;
  readonly #js: JetStreamClient;
  readonly #cfg: ResolvedNatsConfig & { maxPayloadBytes: number };
  readonly #codec: Codec<unknown> | undefined;
  readonly #signals: QueueSignals;
  /** Streams known to exist (or being created), by stream name. */
  readonly #streams = new Map<string, Promise<void>>();
  readonly #subs = new Set<NatsSubscription>();
  readonly #subscribing = new Set<Promise<unknown>>();
  /** Orders subscribing and removing each (topic, group) in this queue. */
  readonly #groupLock = new KeyedLock();
  #connected = true;
  /** Set when `close` is first called: public calls made from then on throw `ClosedError`, as on the engine's queues (`publish` from when the subscriptions have closed). */
  #closing = false;
  #closed = false;
  /** Set once close() has closed the subscriptions: publishes are refused from then on. */
  #publishClosed = false;
  /** Publishes under way: close() lets them reach the server before it closes the connection. */
  readonly #publishing = new Set<Promise<void>>();
  #closePromise: Promise<void> | undefined;

  constructor(nc: NatsConnection, jsm: JetStreamManager, cfg: ResolvedNatsConfig & { maxPayloadBytes: number }, settings: NatsQueueSettings) {
    this.#nc = nc;
    this.#jsm = jsm;
    this.#js = jetstream(nc);
    this.#cfg = cfg;
    this.#codec = checkCodec(settings.codec, 'codec');
    this.#signals = new QueueSignals(this, settings.logger, settings.onError);
    void this.#watchStatus();
  }

  async #watchStatus(): Promise<void> {
    try {
      for await (const s of this.#nc.status()) {
        if (s.type === 'disconnect') this.#connected = false;
        else if (s.type === 'reconnect') this.#connected = true;
      }
    } catch {
      // the iterator ends with the connection
    }
  }

  on<K extends keyof QueueEvents>(event: K, listener: QueueListener<K>): this {
    this.#signals.emitter.on(event, listener as (...args: unknown[]) => void);
    return this;
  }

  once<K extends keyof QueueEvents>(event: K, listener: QueueListener<K>): this {
    this.#signals.emitter.once(event, listener as (...args: unknown[]) => void);
    return this;
  }

  off<K extends keyof QueueEvents>(event: K, listener: QueueListener<K>): this {
    this.#signals.emitter.off(event, listener as (...args: unknown[]) => void);
    return this;
  }

  #assertOpen(): void {
    if (this.#closing || this.#closed) throw new ClosedError('queue is closed');
  }

  /** Creates the dead-delivery ledger stream unless it exists (once per queue). */
  #ensureLedger(): Promise<void> {
    return this.#ensureNamed(deadLedgerStream(this.#cfg.streamPrefix), `${this.#cfg.streamPrefix}-dead.>`);
  }

  /** Creates the attempt ledger stream unless it exists (once per queue): one record kept per delivery. */
  #ensureAttemptLedger(): Promise<void> {
    return this.#ensureNamed(attemptLedgerStream(this.#cfg.streamPrefix), attemptLedgerSubjects(this.#cfg.streamPrefix), { max_msgs_per_subject: 1 });
  }

  /**
   * Records that `did` died in (`topic`, `group`), once per delivery ID
   * within the duplicate window, so `stats` can count dead deliveries.
   */
  async #recordDead(topic: string, group: string, did: string): Promise<void> {
    await this.#ensureLedger();
    try {
      await this.#js.publish(deadLedgerSubject(this.#cfg.streamPrefix, topic, group), new Uint8Array(0), { msgID: did });
    } catch (err) {
      throw asIOError('record a dead delivery', err, SOURCE);
    }
  }

  /** Creates `topic`'s stream unless it exists (once per topic per queue). */
  #ensureStream(topic: string): Promise<void> {
    return this.#ensureNamed(streamName(this.#cfg.streamPrefix, topic), subjectOf(this.#cfg.streamPrefix, topic));
  }

  /** Creates stream `name` unless it exists, once per queue: callers at once share one attempt; a failed one is tried again next time. */
  #ensureNamed(name: string, subject: string, extra: { max_msgs_per_subject?: number } = {}): Promise<void> {
    let p = this.#streams.get(name);
    if (!p) {
      p = this.#addStream(name, subject, extra);
      this.#streams.set(name, p);
      p.catch(() => this.#streams.delete(name));
    }
    return p;
  }

  async #addStream(name: string, subject: string, extra: { max_msgs_per_subject?: number } = {}): Promise<void> {
    try {
      await this.#jsm.streams.info(name);
      return;
    } catch (err) {
      if (!isNotFound(err)) throw asIOError(`stream ${name} info`, err, SOURCE);
    }
    try {
      await this.#jsm.streams.add({
        name,
        subjects: [subject],
        retention: RetentionPolicy.Limits,
        storage: StorageType.File,
        discard: DiscardPolicy.Old,
        num_replicas: this.#cfg.replicas,
        max_age: nanos(this.#cfg.retentionHours * 3_600_000),
        duplicate_window: nanos(this.#cfg.duplicateWindowMs),
        ...extra,
      });
    } catch (err) {
      // Another instance may have created it meanwhile.
      try {
        await this.#jsm.streams.info(name);
      } catch {
        throw asIOError(`create stream ${name}`, err, SOURCE);
      }
    }
  }

  /** Checks and encodes one message; fills in its ID and publish time. */
  #prepare(input: Message<unknown>, codec: Codec<unknown> | undefined, now: number): StoredMessage {
    if (typeof input !== 'object' || input === null) throw new InvalidArgumentError('a message must be an object');
    rejectUnknownKeys('message field', input, MESSAGE_KEYS);
    let payload: unknown = input.payload;
    if (codec) {
      try {
        payload = codec.encode(input.payload);
      } catch (err) {
        throw err instanceof CodecError ? err : new CodecError(`codec refused the payload: ${errorText(err)}`, { cause: err });
      }
      if (!(payload instanceof Uint8Array)) throw new CodecError('codec.encode must return a Uint8Array');
    }
    validateName('topic', input.topic);
    if (input.id !== undefined) validateId('id', input.id);
    if (!(payload instanceof Uint8Array)) throw new InvalidArgumentError('message payload must be a Uint8Array');
    if (payload.byteLength > this.#cfg.maxPayloadBytes) throw new PayloadTooLargeError(`payload is ${payload.byteLength} bytes, more than ${this.#cfg.maxPayloadBytes}`);
    if (input.key !== undefined) {
      validateId('key', input.key);
      throw new UnsupportedError('the nats queue cannot keep per-key order: a JetStream consumer redelivers a failed message after later ones were handed out, so messages with a key are refused');
    }
    if (input.deliverAt !== undefined) throw new UnsupportedError('the nats queue cannot hold a message until deliverAt: JetStream delivers a stored message at once (a negative ack can delay only a message already delivered)');
    if (input.priority !== undefined && input.priority !== 0) throw new UnsupportedError(`the nats queue does not order by priority (message priority ${input.priority}): a JetStream consumer delivers in stream order`);
    if (input.publishedAt !== undefined) validateMessageTime('publishedAt', input.publishedAt);
    if (input.headers !== undefined) {
      if (typeof input.headers !== 'object' || input.headers === null || Array.isArray(input.headers)) throw new InvalidArgumentError('message headers must be an object of strings');
      for (const [k, v] of Object.entries(input.headers)) if (typeof v !== 'string') throw new InvalidArgumentError(`header ${JSON.stringify(k)} is not a string`);
      checkHeaderNames(input.headers);
      const hb = headerBytes(input.headers);
      if (hb > MAX_CALLER_HEADER_BYTES) throw new PayloadTooLargeError(`message headers take ${hb} bytes on the wire, more than the ${MAX_CALLER_HEADER_BYTES} the nats queue carries (the rest of the room under max_payload is for ferry's own headers and a dead-letter copy's)`);
    }
    const out: StoredMessage = { id: input.id ?? uuidV7(now), topic: input.topic, payload, publishedAt: input.publishedAt ?? new Date(now) };
    if (input.headers !== undefined) out.headers = input.headers;
    return out;
  }

  /**
   * See `Queue.publish`. Idempotent by ID within the stream's duplicate
   * window (`duplicateWindowMs`, 2 minutes by default): a second publish of
   * an ID inside it stores nothing; after it, the message is stored again.
   * Also throws `UnsupportedError` for a message with a `key`, a `deliverAt`
   * or a non-zero `priority`, `InvalidArgumentError` for a header name NATS
   * cannot carry, and `IOError` when the server refuses or does not answer.
   */
  publish(...msgs: Message<T>[]): Promise<string[]>;
  publish<U>(...args: [...msgs: Message<U>[], opts: PublishOptions<U>]): Promise<string[]>;
  async publish(...args: unknown[]): Promise<string[]> {
    // Accepted until the subscriptions have closed: a handler close waits for may still publish.
    if (this.#publishClosed) throw new ClosedError('queue is closed');
    const codec = takePublishCodec(args, this.#codec, 'publish');
    const now = Date.now();
    const stored = (args as Message<unknown>[]).map((m) => this.#prepare(m, codec, now));
    const sending = this.#publishStored(stored);
    this.#publishing.add(sending);
    try {
      await sending;
    } catch (err) {
      throw this.#publishClosed ? new ClosedError('queue is closed', { cause: err }) : asIOError('publish', err, SOURCE);
    } finally {
      this.#publishing.delete(sending);
    }
    return stored.map((m) => m.id);
  }

  /** Publishes messages whose IDs and times are set. Not refused while closing: a handler finishing within close's deadline may still dead-letter. */
  async #publishStored(msgs: StoredMessage[]): Promise<void> {
    await Promise.all([...new Set(msgs.map((m) => m.topic))].map((t) => this.#ensureStream(t)));
    // Sent in order on one connection, so the stream stores them in order.
    await Promise.all(
      msgs.map(async (m) => {
        try {
          await this.#js.publish(subjectOf(this.#cfg.streamPrefix, m.topic), m.payload, { msgID: m.id, headers: toHeaders(m) });
        } catch (err) {
          throw asIOError(`publish to ${m.topic}`, err, SOURCE);
        }
      }),
    );
  }

  /**
   * See `Queue.subscribe`. The group is a durable pull consumer of the
   * topic's stream, created on first use with `startFrom` as its deliver
   * policy; its ack wait is raised to this subscription's `leaseDurationMs`
   * when shorter (never lowered: it is every subscription's of the group),
   * and its `max_ack_pending` set to `maxInFlight` (unlimited when 0).
   * Also throws `UnsupportedError` for `rateLimit`.
   */
  subscribe(topic: string, group: string, handler: Handler<T>, opts?: SubscribeOptions<T>): Promise<Subscription>;
  subscribe<U>(topic: string, group: string, handler: Handler<U>, opts: SubscribeOptions<U> & { codec: Codec<U> }): Promise<Subscription>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  async subscribe(topic: string, group: string, handler: Handler<any>, opts?: SubscribeOptions<any>): Promise<Subscription> {
    this.#assertOpen();
    validateName('topic', topic);
    validateName('group', group);
    if (typeof handler !== 'function') throw new InvalidArgumentError('handler must be a function');
    const o = resolveSubscribeOptions(opts);
    if (o.deadLetterTopic !== undefined) validateName('dead-letter topic', o.deadLetterTopic);
    if (o.deadLetterTopic === topic) throw new DeadLetterLoopError(`dead-letter topic ${topic} is the subscribed topic`);
    if (o.rateLimit !== undefined) throw new UnsupportedError('the nats queue cannot cap starts per window (rateLimit): JetStream has no per-consumer rate limit for pull consumers');
    const p = this.#groupLock.run(groupKey(topic, group), () => this.#subscribe(topic, group, handler, o));
    this.#subscribing.add(p);
    try {
      return await p;
    } catch (err) {
      if (this.#closed && !(err instanceof ClosedError)) throw new ClosedError('queue is closed', { cause: err });
      throw err;
    } finally {
      this.#subscribing.delete(p);
    }
  }

  async #subscribe(topic: string, group: string, handler: Handler<unknown>, o: ReturnType<typeof resolveSubscribeOptions>): Promise<Subscription> {
    const stream = streamName(this.#cfg.streamPrefix, topic);
    const durable = durableName(group);
    await this.#ensureStream(topic);
    if (o.deadLetterTopic !== undefined) await this.#ensureStream(o.deadLetterTopic);
    const ackWait = nanos(o.leaseDurationMs);
    const maxAckPending = o.maxInFlight === 0 ? -1 : o.maxInFlight;
    try {
      let info;
      try {
        info = await this.#jsm.consumers.info(stream, durable);
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
      if (info === undefined) {
        const cc: Partial<ConsumerConfig> = {
          durable_name: durable,
          ack_policy: AckPolicy.Explicit,
          ack_wait: ackWait,
          max_ack_pending: maxAckPending,
          max_deliver: -1,
          deliver_policy: o.startFrom === 'earliest' ? DeliverPolicy.All : DeliverPolicy.New,
        };
        try {
          await this.#jsm.consumers.add(stream, cc);
        } catch (err) {
          info = await this.#jsm.consumers.info(stream, durable).catch(() => undefined);
          if (info === undefined) throw err;
        }
      }
      // The ack wait is the group's, shared by every subscription of it: it only ever grows to the longest
      // lease asked for, so a subscription with a shorter lease (a rolling deploy changing it) cannot cut
      // the leases of the others short. A shorter lease only renews, and gives up a lapsed lease, sooner.
      // Two subscribes raising it at once: each checks again after its update until the wait is long enough
      // for itself; when the shorter one wrote last, the longer one's heartbeat puts its lease back (checkGroup).
      for (let tries = 0; info !== undefined && tries < 5; tries++) {
        const want = Math.max(ackWait, info.config.ack_wait ?? 0);
        if (info.config.ack_wait === want && info.config.max_ack_pending === maxAckPending) break;
        await this.#jsm.consumers.update(stream, durable, { ack_wait: want, max_ack_pending: maxAckPending });
        info = await this.#jsm.consumers.info(stream, durable);
      }
    } catch (err) {
      throw asIOError(`register group ${group} on ${topic}`, err, SOURCE);
    }
    this.#assertOpen();
    const consumer = await this.#js.consumers.get(stream, durable);
    const sub = new NatsSubscription(topic, group, consumer, handler, o, o.codec ?? this.#codec, {
      nc: this.#nc,
      signals: this.#signals,
      connected: () => this.#connected && !this.#nc.isClosed(),
      publishStored: (msgs) => this.#publishStored(msgs),
      recordDead: (did) => this.#recordDead(topic, group, did),
      ledger: new AttemptLedger(this.#js, this.#jsm, this.#cfg.streamPrefix, topic, group, () => this.#ensureAttemptLedger()),
      checkGroup: async () => {
        try {
          const now = await this.#jsm.consumers.info(stream, durable);
          if ((now.config.ack_wait ?? 0) < ackWait) await this.#jsm.consumers.update(stream, durable, { ack_wait: ackWait });
          return false;
        } catch (err) {
          return isNotFound(err);
        }
      },
      forget: (s) => this.#subs.delete(s),
    });
    if (this.#closing) {
      // The queue closed while this was being set up: close() no longer sees it.
      await sub.close({ timeoutMs: 0 }).catch(() => undefined);
      throw new ClosedError('queue is closed');
    }
    this.#subs.add(sub);
    return sub;
  }

  /**
   * See `Queue.stats`, from the consumer's info: `pending` is what the group
   * has not been handed yet (`num_pending`); `leased` is what is handed out
   * and not acked (`num_ack_pending`), which also counts deliveries waiting
   * out a retry backoff; `dead` counts the group's entries in the dead
   * ledger stream (`<prefix>-DEAD`, one per dead delivery, kept
   * `retentionHours`);
   * `oldestPendingAgeMs` is the age of the first message not yet handed out;
   * `paused` is always false. An unregistered group reports zeros.
   */
  async stats(topic: string, group: string): Promise<QueueStats> {
    validateName('topic', topic);
    validateName('group', group);
    this.#assertOpen();
    const stream = streamName(this.#cfg.streamPrefix, topic);
    let info;
    try {
      info = await this.#jsm.consumers.info(stream, durableName(group));
    } catch (err) {
      if (isNotFound(err)) return { pending: 0, leased: 0, dead: 0, oldestPendingAgeMs: 0, paused: false };
      throw this.#failed(`stats of ${group} on ${topic}`, err);
    }
    let oldestPendingAgeMs = 0;
    if (info.num_pending > 0) {
      const m = await this.#jsm.streams.getMessage(stream, { seq: info.delivered.stream_seq + 1 }).catch(() => null);
      if (m) oldestPendingAgeMs = Math.max(0, Date.now() - m.time.getTime());
    }
    let dead = 0;
    try {
      await this.#ensureLedger();
      const subject = deadLedgerSubject(this.#cfg.streamPrefix, topic, group);
      const li = await this.#jsm.streams.info(deadLedgerStream(this.#cfg.streamPrefix), { subjects_filter: subject });
      dead = li.state.subjects?.[subject] ?? 0;
    } catch (err) {
      throw this.#failed(`stats of ${group} on ${topic}`, err);
    }
    return { pending: info.num_pending, leased: info.num_ack_pending, dead, oldestPendingAgeMs, paused: false };
  }

  /** Not supported: JetStream servers before 2.11 cannot pause a consumer. Throws `UnsupportedError` (after `InvalidNameError`, `ClosedError`). */
  async pauseGroup(topic: string, group: string): Promise<boolean> {
    validateName('topic', topic);
    validateName('group', group);
    this.#assertOpen();
    throw new UnsupportedError('the nats queue cannot pause a group: consumer pause needs nats-server 2.11 or later');
  }

  /** Not supported, as `pauseGroup`. */
  async resumeGroup(topic: string, group: string): Promise<boolean> {
    return this.pauseGroup(topic, group);
  }

  /** See `Queue.removeGroup`: deletes the group's durable consumer. */
  async removeGroup(topic: string, group: string): Promise<boolean> {
    validateName('topic', topic);
    validateName('group', group);
    this.#assertOpen();
    return this.#groupLock.run(groupKey(topic, group), () => this.#removeGroup(topic, group));
  }

  async #removeGroup(topic: string, group: string): Promise<boolean> {
    for (const s of this.#subs) if (s.topic === topic && s.group === group) throw new InvalidArgumentError(`group ${group} on ${topic} has a subscription in this queue that has not finished closing`);
    try {
      const had = await this.#jsm.consumers.delete(streamName(this.#cfg.streamPrefix, topic), durableName(group));
      await this.#ensureLedger();
      await this.#jsm.streams.purge(deadLedgerStream(this.#cfg.streamPrefix), { filter: deadLedgerSubject(this.#cfg.streamPrefix, topic, group) });
      await this.#ensureAttemptLedger();
      await this.#jsm.streams.purge(attemptLedgerStream(this.#cfg.streamPrefix), { filter: attemptLedgerGroupFilter(this.#cfg.streamPrefix, topic, group) });
      return had;
    } catch (err) {
      if (isNotFound(err)) return false;
      throw this.#failed(`remove group ${group} on ${topic}`, err);
    }
  }

  /** See `Queue.listGroups`: the durable consumers of this queue's streams. */
  async listGroups(topic?: string): Promise<ConsumerGroup[]> {
    if (topic !== undefined) validateName('topic', topic);
    this.#assertOpen();
    const out: ConsumerGroup[] = [];
    try {
      const streams: Array<{ topic: string; stream: string }> = [];
      if (topic !== undefined) streams.push({ topic, stream: streamName(this.#cfg.streamPrefix, topic) });
      else {
        for await (const si of this.#jsm.streams.list()) {
          const t = topicOfStream(this.#cfg.streamPrefix, si.config.name);
          if (t !== undefined) streams.push({ topic: t, stream: si.config.name });
        }
      }
      for (const { topic: t, stream } of streams) {
        try {
          for await (const ci of this.#jsm.consumers.list(stream)) {
            const g = ci.config.durable_name;
            const name = g === undefined ? undefined : unescapeName(g);
            if (name !== undefined) out.push({ topic: t, group: name });
          }
        } catch (err) {
          if (!isNotFound(err)) throw err;
        }
      }
    } catch (err) {
      throw this.#failed('list groups', err);
    }
    const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
    return out.sort((a, b) => cmp(a.topic, b.topic) || cmp(a.group, b.group));
  }

  async #listPage(topic: string, page: { after?: string; limit: number }): Promise<MessagePage> {
    const stream = streamName(this.#cfg.streamPrefix, topic);
    let after = 0;
    if (page.after !== undefined) {
      if (!/^[0-9]{1,15}$/.test(page.after)) throw new InvalidArgumentError(`cursor ${JSON.stringify(page.after)} was not handed out by this queue`);
      after = Number(page.after);
    }
    let last: number;
    let first: number;
    try {
      const si = await this.#jsm.streams.info(stream);
      last = si.state.last_seq;
      first = si.state.first_seq;
    } catch (err) {
      if (isNotFound(err)) return { messages: [] };
      throw this.#failed(`list messages of ${topic}`, err);
    }
    const messages: StoredMessage[] = [];
    let seq = Math.max(after + 1, first);
    for (; seq <= last && messages.length < page.limit; seq++) {
      let sm;
      try {
        sm = await this.#jsm.streams.getMessage(stream, { seq });
      } catch (err) {
        if (isNotFound(err)) continue; // deleted or aged out
        throw this.#failed(`list messages of ${topic}`, err);
      }
      if (sm) messages.push(fromWire(topic, sm.data, sm.header, sm.time, `seq-${sm.seq}`));
    }
    return seq <= last ? { messages, next: String(seq - 1) } : { messages };
  }

  /** See `Queue.listMessages`: reads the topic's stream message by message (one round trip each). */
  async listMessages(topic: string, opts?: ListMessagesOptions): Promise<MessagePage> {
    validateName('topic', topic);
    rejectUnknownKeys('listMessages option', opts, LIST_MESSAGES_OPTION_KEYS);
    const limit = opts?.limit ?? 100;
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) throw new InvalidArgumentError(`limit must be an integer from 1 to 1000, got ${String(limit)}`);
    if (opts?.after !== undefined && typeof opts.after !== 'string') throw new InvalidArgumentError('after must be a string cursor');
    this.#assertOpen();
    return this.#listPage(topic, opts?.after === undefined ? { limit } : { after: opts.after, limit });
  }

  /** See `Queue.redrive`. A redriven ID is de-duplicated only within the duplicate window of the source topic's stream. */
  async redrive(deadLetterTopic: string, opts?: RedriveOptions): Promise<RedriveResult> {
    this.#assertOpen();
    const store = { listMessages: (t: string, p: { after?: string; limit: number }) => this.#listPage(t, p) } as unknown as Store;
    return redrive({ store, maxPayloadBytes: this.#cfg.maxPayloadBytes, append: (msgs) => this.#publishStored(msgs) }, deadLetterTopic, opts);
  }

  /** Not supported: the nats queue keeps no schedules. Throws `UnsupportedError`. */
  async schedule(_name: string, _opts: ScheduleOptions<T>): Promise<boolean> {
    this.#assertOpen();
    throw new UnsupportedError('the nats queue keeps no schedules (use a store-backed queue for them)');
  }

  /** Not supported, as `schedule`. */
  async unschedule(name: string): Promise<boolean> {
    return this.schedule(name, undefined as never);
  }

  /** Not supported, as `schedule`. */
  async listSchedules(): Promise<ScheduleInfo[]> {
    await this.schedule('', undefined as never);
    return [];
  }

  /** Checks that the server answers and JetStream is on. */
  async ping(): Promise<void> {
    this.#assertOpen();
    try {
      await this.#jsm.getAccountInfo();
    } catch (err) {
      throw this.#failed('ping', err);
    }
  }

  /** The error a call that failed on the server rejects with: `ClosedError` once the queue is closing (close cut it short), else an `IOError`. */
  #failed(what: string, err: unknown): FerryError {
    if (this.#closing || this.#closed) return new ClosedError('queue is closed', { cause: err });
    return asIOError(what, err, SOURCE);
  }

  /** See `Queue.close`. The connection is closed last, waiting at most 2 s for a server that no longer answers. */
  close(opts?: CloseOptions): Promise<void> {
    checkCloseOptions(opts);
    this.#closing = true;
    this.#closePromise ??= this.#close(opts);
    return this.#closePromise;
  }

  async #close(opts: CloseOptions | undefined): Promise<void> {
    // A subscribe under way is waited for until the deadline at most (it
    // waits on the server, which may not answer); one that ends later finds
    // the queue closed, closes what it made and rejects with ClosedError.
    this.#closed = true;
    // One deadline for the whole close: what the subscribes took is not given to the handlers again.
    const deadline = opts?.timeoutMs !== undefined ? performance.now() + opts.timeoutMs : undefined;
    let timer: NodeJS.Timeout | undefined;
    let off: (() => void) | undefined;
    await Promise.race([
      Promise.allSettled([...this.#subscribing]),
      new Promise<void>((r) => (timer = setTimeout(r, opts?.timeoutMs ?? CONNECTION_CLOSE_MS))),
      // The caller's signal may outlive this close (one signal for a whole shutdown): nothing of it is left on the signal.
      ...(opts?.signal ? [new Promise<void>((r) => (opts.signal!.aborted ? r() : (off = whenAborted(opts.signal!, r))))] : []),
    ]);
    clearTimeout(timer);
    off?.();
    const subOpts = deadline === undefined ? opts : { ...opts, timeoutMs: Math.max(0, Math.ceil(deadline - performance.now())) };
    await Promise.allSettled([...this.#subs].map((s) => s.close(subOpts)));
    this.#publishClosed = true;
    // What the handlers, and callers before this point, published reaches the server first (within the deadline).
    const left = deadline === undefined ? CONNECTION_CLOSE_MS : Math.max(0, Math.ceil(deadline - performance.now()));
    await Promise.race([Promise.allSettled([...this.#publishing]), new Promise<void>((r) => (timer = setTimeout(r, left)))]);
    clearTimeout(timer);
    await Promise.race([this.#nc.close().catch(() => undefined), new Promise<void>((r) => (timer = setTimeout(r, CONNECTION_CLOSE_MS)))]);
    clearTimeout(timer);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
