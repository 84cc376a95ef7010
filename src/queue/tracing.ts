/**
 * OpenTelemetry tracing of a queue, after OpenTelemetry's messaging semantic
 * conventions: a publish span whose context travels in each message's
 * headers (W3C `traceparent` / `tracestate`, through the registered
 * propagator), and a process span around each handler attempt, linked to the
 * context the message carries.
 *
 * It is off unless the engine's `tracing` option is on. Off, the queue holds
 * `null` where it would hold a `QueueTracing`, and `@opentelemetry/api` (an
 * optional peer dependency) is never loaded: the publish and handler paths
 * pay one null test. On, the API is loaded once, when the queue is built.
 */
import { createRequire } from 'node:module';
import type * as OpenTelemetryApi from '@opentelemetry/api';
import { UnsupportedError } from '../errors.js';
import { errorText } from './dead-letter.js';
import type { DeadLetterReason } from './events.js';
import { PermanentError } from './permanent.js';
import type { Claimed, StoredMessage } from './types.js';
import type { TracingOptions } from './tracing-options.js';

type Api = typeof OpenTelemetryApi;
type Span = OpenTelemetryApi.Span;
type Context = OpenTelemetryApi.Context;

/** The name of the tracer (instrumentation scope) the spans are made by. */
export const TRACER_NAME = 'ferry';
/** `messaging.system` of every span. */
export const MESSAGING_SYSTEM = 'ferry';

/**
 * Why a handler attempt's span ended: `ack` (the handler resolved), `retry`
 * or `dead_letter` (it failed, or its payload could not be decoded), or
 * `discard` (its lease was lost, or close gave up waiting: whatever it did
 * is thrown away). Recorded as `messaging.ferry.outcome`.
 */
export type ProcessOutcome = 'ack' | 'retry' | 'dead_letter' | 'discard';

/**
 * Loads `@opentelemetry/api` (the same module instance a user's
 * `import … from '@opentelemetry/api'` gets). Throws `UnsupportedError` when
 * it is not installed.
 */
function loadApi(): Api {
  try {
    return createRequire(import.meta.url)('@opentelemetry/api') as Api;
  } catch (err) {
    throw new UnsupportedError('tracing is on but @opentelemetry/api could not be loaded: install it (npm install @opentelemetry/api)', { cause: err });
  }
}

/** The traced work of one queue: publishes and handler attempts. Built only when tracing is on. @internal */
export class QueueTracing {
  readonly #api: Api;
  readonly #tracer: OpenTelemetryApi.Tracer;
  readonly #createSpans: boolean;
  readonly #parentFromMessage: boolean;

  /**
   * The tracing of a queue built with `option` (see `checkTracing`), or
   * `null` when it is off. Throws `UnsupportedError` when it is on and
   * `@opentelemetry/api` is not installed.
   */
  static from(option: TracingOptions | undefined): QueueTracing | null {
    return option === undefined ? null : new QueueTracing(loadApi(), option);
  }

  private constructor(api: Api, o: TracingOptions) {
    this.#api = api;
    const provider = (o.tracerProvider as OpenTelemetryApi.TracerProvider | undefined) ?? api.trace.getTracerProvider();
    this.#tracer = provider.getTracer(TRACER_NAME);
    this.#createSpans = o.createSpans ?? true;
    this.#parentFromMessage = o.parentFromMessage ?? false;
  }

  /**
   * Traces one `publish` call: `msgs` are its prepared messages (their
   * headers are replaced by copies carrying the trace context), `send`
   * stores them. Spans, all children of the caller's active context:
   *
   * - one message: `publish <topic>` (kind PRODUCER), whose context the
   *   message carries;
   * - several: `create <topic>` (PRODUCER) per message, whose context that
   *   message carries, and `publish <topic>` (CLIENT, `publish` alone when
   *   the topics differ) linked to each of them.
   *
   * A message whose headers already carry a trace context keeps it (it was
   * forwarded, or its creator chose it): no `create` span, and the publish
   * span links to it. `send` runs inside the publish span's context; its
   * rejection is recorded on the span and rethrown.
   */
  publish(msgs: StoredMessage[], send: () => Promise<void>): Promise<void> {
    const { context, trace, SpanKind } = this.#api;
    const parent = context.active();
    const first = msgs[0]!.topic;
    const topic = msgs.every((m) => m.topic === first) ? first : undefined;
    const batch = msgs.length > 1;
    const links: OpenTelemetryApi.Link[] = [];
    const carryPublish: StoredMessage[] = []; // messages that carry the publish span's own context
    for (const m of msgs) {
      const given = this.#carried(m.headers);
      if (given !== undefined) links.push({ context: given, attributes: this.#linkAttributes(m, topic) });
      else if (batch && this.#createSpans) {
        const create = this.#tracer.startSpan(`create ${m.topic}`, {
          kind: SpanKind.PRODUCER,
          attributes: {
            'messaging.system': MESSAGING_SYSTEM,
            'messaging.operation.name': 'create',
            'messaging.operation.type': 'create',
            'messaging.destination.name': m.topic,
            'messaging.message.id': m.id,
          },
        }, parent);
        this.#inject(m, trace.setSpan(parent, create));
        links.push({ context: create.spanContext(), attributes: this.#linkAttributes(m, topic) });
        create.end();
      } else carryPublish.push(m);
    }
    const attributes: OpenTelemetryApi.Attributes = { 'messaging.system': MESSAGING_SYSTEM, 'messaging.operation.name': 'publish', 'messaging.operation.type': 'send' };
    if (topic !== undefined) attributes['messaging.destination.name'] = topic;
    if (batch) attributes['messaging.batch.message_count'] = msgs.length;
    else attributes['messaging.message.id'] = msgs[0]!.id;
    const span = this.#tracer.startSpan(topic === undefined ? 'publish' : `publish ${topic}`, {
      // PRODUCER when some message carries this span's context: the conventions' "send" span that is a creation context.
      kind: carryPublish.length > 0 ? SpanKind.PRODUCER : SpanKind.CLIENT,
      attributes,
      links,
    }, parent);
    const inSpan = trace.setSpan(parent, span);
    for (const m of carryPublish) this.#inject(m, inSpan);
    return context.with(inSpan, send).then(
      () => span.end(),
      (err: unknown) => {
        recordError(this.#api, span, err);
        span.end();
        throw err;
      },
    );
  }

  /**
   * Starts the span of one handler attempt of `c`: `process <topic>` (kind
   * CONSUMER), linked to the context the message carries (and its child
   * with `parentFromMessage`; otherwise the root of a trace of its own,
   * whatever context the subscription was started in). Baggage the message
   * carries is kept in the handler's context either way.
   */
  startProcess(c: Claimed, topic: string, group: string): ProcessSpan {
    const { propagation, trace, ROOT_CONTEXT, SpanKind } = this.#api;
    const carried = c.message.headers === undefined ? ROOT_CONTEXT : propagation.extract(ROOT_CONTEXT, c.message.headers);
    const creation = trace.getSpanContext(carried);
    const links = creation !== undefined && trace.isSpanContextValid(creation) ? [{ context: creation }] : [];
    // Not the message's child: keep what else it carries (baggage), without its span.
    const base = this.#parentFromMessage || creation === undefined ? carried : trace.deleteSpan(carried);
    const span = this.#tracer.startSpan(`process ${topic}`, {
      kind: SpanKind.CONSUMER,
      attributes: {
        'messaging.system': MESSAGING_SYSTEM,
        'messaging.operation.name': 'process',
        'messaging.operation.type': 'process',
        'messaging.destination.name': topic,
        'messaging.consumer.group.name': group,
        'messaging.message.id': c.message.id,
        'messaging.ferry.attempt': c.attempt,
        'messaging.ferry.delivery_id': c.deliveryId,
      },
      links,
    }, base);
    return new ProcessSpan(this.#api, span, trace.setSpan(base, span));
  }

  /** What a link to one message of a publish says about it: its ID, and its topic when the publish's topics differ. */
  #linkAttributes(m: StoredMessage, topic: string | undefined): OpenTelemetryApi.Attributes {
    return topic === undefined ? { 'messaging.message.id': m.id, 'messaging.destination.name': m.topic } : { 'messaging.message.id': m.id };
  }

  /** The valid span context `headers` already carry, if any. */
  #carried(headers: Record<string, string> | undefined): OpenTelemetryApi.SpanContext | undefined {
    if (headers === undefined) return undefined;
    const { propagation, trace, ROOT_CONTEXT } = this.#api;
    const sc = trace.getSpanContext(propagation.extract(ROOT_CONTEXT, headers));
    return sc !== undefined && trace.isSpanContextValid(sc) ? sc : undefined;
  }

  /** Puts `ctx` into a copy of `m`'s headers (the caller's object is never changed), through the registered propagator. */
  #inject(m: StoredMessage, ctx: Context): void {
    const carrier: Record<string, string> = {};
    this.#api.propagation.inject(ctx, carrier);
    for (const _ in carrier) {
      m.headers = { ...m.headers, ...carrier };
      return;
    }
  }
}

/** Marks `span` failed with `err`: the exception event, status ERROR and `error.type` (the error's class name). */
function recordError(api: Api, span: Span, err: unknown): void {
  // `permanent(err)` is a marker: what the handler failed with is its cause.
  const shown = err instanceof PermanentError ? err.cause : err;
  span.recordException(shown instanceof Error ? shown : errorText(shown));
  span.setStatus({ code: api.SpanStatusCode.ERROR, message: errorText(shown) });
  span.setAttribute('error.type', shown instanceof Error ? shown.constructor.name || shown.name : '_OTHER');
}

/** The span of one handler attempt, from `QueueTracing.startProcess`. @internal */
export class ProcessSpan {
  readonly #api: Api;
  readonly #span: Span;
  readonly #ctx: Context;
  #ended = false;

  /** @internal */
  constructor(api: Api, span: Span, ctx: Context) {
    this.#api = api;
    this.#span = span;
    this.#ctx = ctx;
  }

  /** Runs the handler inside the span's context, so the spans it starts are the span's children. */
  run<R>(fn: () => R): R {
    return this.#api.context.with(this.#ctx, fn);
  }

  /**
   * Ends the span with its outcome (`messaging.ferry.outcome`). `error`, for
   * `retry` and `dead_letter`, is recorded as the span's exception and
   * status; `reason` of a dead letter as `messaging.ferry.dead_letter.reason`.
   * Only the first call counts.
   */
  end(outcome: ProcessOutcome, error?: unknown, reason?: DeadLetterReason): void {
    if (this.#ended) return;
    this.#ended = true;
    const span = this.#span;
    span.setAttribute('messaging.ferry.outcome', outcome);
    if (reason !== undefined) span.setAttribute('messaging.ferry.dead_letter.reason', reason);
    if (outcome === 'retry' || outcome === 'dead_letter') recordError(this.#api, span, error);
    span.end();
  }
}
