/**
 * OpenTelemetry tracing of publishes and handler attempts, read back through
 * the SDK's in-memory span exporter, on the memory and SQLite stores: the
 * trace context a message carries, the spans' names, kinds, attributes,
 * links and parents, errors and dead letters, the handler's own spans, and
 * nothing at all when tracing is off. The process-wide context manager and
 * propagator are the ones an application would register.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, context, propagation, trace } from '@opentelemetry/api';
import type { Span } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { InvalidArgumentError } from '../../src/errors.js';
import { MemoryStore, codecs, createQueue, createStoreQueue, permanent } from '../../src/queue/index.js';
import type { Delivery, StoredMessage } from '../../src/queue/index.js';
import { FAST, dec, enc, engineHarness } from '../stores/engine-harness.js';
import { memoryFactory, sqliteFactory } from '../stores/factories.js';
import { deferred, sleep, waitFor } from '../stores/helpers.js';

const here = dirname(fileURLToPath(import.meta.url));
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const app = provider.getTracer('app');
const traced = { tracing: { tracerProvider: provider } };

before(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
});
after(async () => {
  context.disable();
  propagation.disable();
  await provider.shutdown();
});
beforeEach(() => exporter.reset());

const finished = (name: string): ReadableSpan[] => exporter.getFinishedSpans().filter((s) => s.name === name);
const spanId = (s: ReadableSpan | Span) => s.spanContext().spanId;
/** Waits until `n` spans named `name` have ended, and returns them in the order they ended. */
async function ended(name: string, n: number): Promise<ReadableSpan[]> {
  await waitFor(() => finished(name).length >= n, 5000, `${n} "${name}" spans`);
  return finished(name);
}
/** Runs `fn` with `span` active, as a traced request handler of the application would. */
const within = <R>(span: Span, fn: () => R): R => context.with(trace.setSpan(context.active(), span), fn);
/** Runs `fixtures/<name>` in a fresh process (nothing registered, nothing loaded) and returns the JSON it printed. */
function childReport(name: string): unknown {
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(here, 'fixtures', name)], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}
/** The span ID a `traceparent` header names. */
const parentIdOf = (traceparent: string | undefined) => traceparent?.split('-')[2];

for (const factory of [memoryFactory, sqliteFactory]) {
  describe(`tracing on the ${factory.name} store`, () => {
    const e = engineHarness(factory);

    it('a publish in an active span carries its context; the handler runs in a linked process span named and attributed by the messaging conventions', async () => {
      const { q } = await e.instance(traced);
      const got = deferred<Delivery>();
      await q.subscribe('orders', 'billing', async (d) => got.resolve(d), FAST);
      const request = app.startSpan('request');
      const headers = { origin: 'web' };
      const [id] = await within(request, () => q.publish({ topic: 'orders', payload: enc('1'), headers }));
      request.end();
      const d = await got.promise;
      assert.deepEqual(headers, { origin: 'web' }, "the caller's headers object is not changed");

      const [publish] = await ended('publish orders', 1);
      assert.equal(publish!.kind, SpanKind.PRODUCER);
      assert.equal(publish!.parentSpanContext?.spanId, spanId(request));
      assert.equal(publish!.spanContext().traceId, request.spanContext().traceId);
      assert.deepEqual(publish!.attributes, {
        'messaging.system': 'ferry', 'messaging.operation.name': 'publish', 'messaging.operation.type': 'send',
        'messaging.destination.name': 'orders', 'messaging.message.id': id,
      });
      assert.equal(d.headers?.origin, 'web');
      assert.equal(d.headers?.traceparent, `00-${publish!.spanContext().traceId}-${spanId(publish!)}-01`);

      const [process] = await ended('process orders', 1);
      assert.equal(process!.kind, SpanKind.CONSUMER);
      assert.equal(process!.parentSpanContext, undefined, 'the root of its own trace');
      assert.notEqual(process!.spanContext().traceId, publish!.spanContext().traceId);
      assert.deepEqual(process!.links.map((l) => [l.context.traceId, l.context.spanId]), [[publish!.spanContext().traceId, spanId(publish!)]]);
      assert.deepEqual(process!.attributes, {
        'messaging.system': 'ferry', 'messaging.operation.name': 'process', 'messaging.operation.type': 'process',
        'messaging.destination.name': 'orders', 'messaging.consumer.group.name': 'billing', 'messaging.message.id': id,
        'messaging.ferry.attempt': 1, 'messaging.ferry.delivery_id': d.deliveryId, 'messaging.ferry.outcome': 'ack',
      });
      assert.equal(process!.status.code, SpanStatusCode.UNSET);
      assert.equal(process!.instrumentationScope.name, 'ferry');
    });

    it('a failed attempt records its exception and status; the next attempt gets a span of its own with attempt 2', async () => {
      const { q } = await e.instance(traced);
      await q.subscribe('t', 'g', async (d) => {
        if (d.attempt === 1) throw new TypeError('not yet');
      }, FAST);
      await q.publish({ topic: 't', payload: enc('x') });
      const [first, second] = await ended('process t', 2);
      const [publish] = finished('publish t');
      assert.deepEqual([first!.attributes['messaging.ferry.attempt'], second!.attributes['messaging.ferry.attempt']], [1, 2]);
      assert.notEqual(spanId(first!), spanId(second!));
      for (const s of [first!, second!]) assert.equal(s.links[0]?.context.spanId, spanId(publish!), 'every attempt links to the publish');
      assert.equal(first!.attributes['messaging.ferry.outcome'], 'retry');
      assert.deepEqual(first!.status, { code: SpanStatusCode.ERROR, message: 'not yet' });
      assert.equal(first!.attributes['error.type'], 'TypeError');
      const exception = first!.events.find((ev) => ev.name === 'exception');
      assert.equal(exception?.attributes?.['exception.type'], 'TypeError');
      assert.equal(exception?.attributes?.['exception.message'], 'not yet');
      assert.equal(second!.attributes['messaging.ferry.outcome'], 'ack');
      assert.equal(second!.status.code, SpanStatusCode.UNSET);
      assert.equal(second!.events.length, 0);
    });

    it('dead letters show their outcome and reason: permanent (the cause recorded), exhausted, and a payload that cannot be decoded', async () => {
      const { q } = await e.instance(traced);
      await q.subscribe('jobs', 'g', async (d) => {
        if (dec(d.payload) === 'permanent') throw permanent(new RangeError('never valid'));
        throw new Error('always fails');
      }, { ...FAST, maxAttempts: 1 });
      await q.subscribe('json', 'g', async () => undefined, { ...FAST, codec: codecs.json });
      const [permId, exhaustedId] = await q.publish({ topic: 'jobs', payload: enc('permanent') }, { topic: 'jobs', payload: enc('exhausted') }, { topic: 'json', payload: enc('{not json') });
      const jobs = await ended('process jobs', 2);
      const perm = jobs.find((s) => s.attributes['messaging.message.id'] === permId);
      const exhausted = jobs.find((s) => s.attributes['messaging.message.id'] === exhaustedId);
      assert.equal(perm!.attributes['messaging.ferry.outcome'], 'dead_letter');
      assert.equal(perm!.attributes['messaging.ferry.dead_letter.reason'], 'permanent');
      assert.deepEqual(perm!.status, { code: SpanStatusCode.ERROR, message: 'never valid' });
      assert.equal(perm!.events.find((ev) => ev.name === 'exception')?.attributes?.['exception.type'], 'RangeError', 'the cause, not the permanent() marker');
      assert.equal(exhausted!.attributes['messaging.ferry.outcome'], 'dead_letter');
      assert.equal(exhausted!.attributes['messaging.ferry.dead_letter.reason'], 'exhausted');
      assert.equal(exhausted!.attributes['error.type'], 'Error');
      const [decode] = await ended('process json', 1);
      assert.equal(decode!.attributes['messaging.ferry.outcome'], 'dead_letter');
      assert.equal(decode!.attributes['messaging.ferry.dead_letter.reason'], 'decode');
      assert.equal(decode!.attributes['error.type'], 'CodecError');
      assert.equal(decode!.status.code, SpanStatusCode.ERROR);
    });

    it('a dead-letter copy keeps the trace context of the original publish, so its consumer links to that publish', async () => {
      const { q } = await e.instance(traced);
      await q.subscribe('work', 'g', async () => {
        throw permanent(new Error('no'));
      }, { ...FAST, deadLetterTopic: 'work.dead' });
      const dead = deferred<Delivery>();
      await q.subscribe('work.dead', 'ops', async (d) => dead.resolve(d), FAST);
      await q.publish({ topic: 'work', payload: enc('x') });
      const d = await dead.promise;
      const [publish] = await ended('publish work', 1);
      assert.equal(parentIdOf(d.headers?.traceparent), spanId(publish!));
      const [process] = await ended('process work.dead', 1);
      assert.equal(process!.links[0]?.context.spanId, spanId(publish!));
      assert.equal(process!.attributes['messaging.consumer.group.name'], 'ops');
    });

    it('a span the handler starts, after awaiting, is a child of its process span', async () => {
      const { q } = await e.instance(traced);
      await q.subscribe('t', 'g', async () => {
        await sleep(1);
        const inner = app.startSpan('handler work');
        await sleep(1);
        inner.end();
      }, FAST);
      await q.publish({ topic: 't', payload: enc('x') });
      const [inner] = await ended('handler work', 1);
      const [process] = await ended('process t', 1);
      assert.equal(inner!.parentSpanContext?.spanId, spanId(process!));
      assert.equal(inner!.spanContext().traceId, process!.spanContext().traceId);
    });

    it('parentFromMessage: the process span is a child of the publish span, and still linked to it', async () => {
      const { q } = await e.instance({ tracing: { tracerProvider: provider, parentFromMessage: true } });
      await q.subscribe('t', 'g', async () => undefined, FAST);
      await q.publish({ topic: 't', payload: enc('x') });
      const [publish] = await ended('publish t', 1);
      const [process] = await ended('process t', 1);
      assert.equal(process!.parentSpanContext?.spanId, spanId(publish!));
      assert.equal(process!.spanContext().traceId, publish!.spanContext().traceId);
      assert.equal(process!.links[0]?.context.spanId, spanId(publish!));
    });

    it('a publish of several messages makes a create span per message, carried by it, and a publish span linked to each', async () => {
      const { q } = await e.instance(traced);
      const got: Delivery[] = [];
      await q.subscribe('a', 'g', async (d) => void got.push(d), FAST);
      await q.subscribe('b', 'g', async (d) => void got.push(d), FAST);
      const request = app.startSpan('request');
      const ids = await within(request, () => q.publish({ topic: 'a', payload: enc('1') }, { topic: 'a', payload: enc('2') }, { topic: 'b', payload: enc('3') }));
      request.end();
      await waitFor(() => got.length === 3, 5000, 'three deliveries');
      const creates = [...finished('create a'), ...finished('create b')];
      assert.equal(creates.length, 3);
      const [publish] = finished('publish');
      assert.equal(publish!.kind, SpanKind.CLIENT, 'no message carries its context');
      assert.equal(publish!.attributes['messaging.batch.message_count'], 3);
      assert.equal(publish!.attributes['messaging.destination.name'], undefined, 'the topics differ');
      assert.equal(publish!.parentSpanContext?.spanId, spanId(request));
      for (const [i, id] of ids.entries()) {
        const create = creates.find((c) => c.attributes['messaging.message.id'] === id)!;
        assert.equal(create.kind, SpanKind.PRODUCER);
        assert.equal(create.attributes['messaging.operation.type'], 'create');
        assert.equal(create.parentSpanContext?.spanId, spanId(request));
        const link = publish!.links.find((l) => l.context.spanId === spanId(create));
        assert.deepEqual(link?.attributes, { 'messaging.message.id': id, 'messaging.destination.name': i < 2 ? 'a' : 'b' });
        assert.equal(parentIdOf(got.find((d) => d.id === id)!.headers?.traceparent), spanId(create));
      }
      const processes = await ended('process a', 2);
      for (const p of [...processes, ...(await ended('process b', 1))]) {
        const create = creates.find((c) => c.attributes['messaging.message.id'] === p.attributes['messaging.message.id'])!;
        assert.equal(p.links[0]?.context.spanId, spanId(create));
      }
    });

    it('createSpans: false makes only the publish span, a PRODUCER whose context every message carries', async () => {
      const { q } = await e.instance({ tracing: { tracerProvider: provider, createSpans: false } });
      const got: Delivery[] = [];
      await q.subscribe('a', 'g', async (d) => void got.push(d), FAST);
      await q.publish({ topic: 'a', payload: enc('1') }, { topic: 'a', payload: enc('2') });
      await waitFor(() => got.length === 2, 5000, 'two deliveries');
      assert.equal(finished('create a').length, 0);
      const [publish] = finished('publish a');
      assert.equal(publish!.kind, SpanKind.PRODUCER);
      assert.equal(publish!.attributes['messaging.destination.name'], 'a');
      assert.equal(publish!.attributes['messaging.batch.message_count'], 2);
      assert.deepEqual(got.map((d) => parentIdOf(d.headers?.traceparent)), [spanId(publish!), spanId(publish!)]);
    });

    it('a message that already carries a trace context keeps it; the publish span links to it', async () => {
      const { q } = await e.instance(traced);
      const got = deferred<Delivery>();
      await q.subscribe('t', 'g', async (d) => got.resolve(d), FAST);
      const earlier = app.startSpan('earlier');
      earlier.end();
      const carrier: Record<string, string> = {};
      propagation.inject(trace.setSpan(ROOT_CONTEXT, earlier), carrier);
      await q.publish({ topic: 't', payload: enc('x'), headers: { ...carrier } });
      const d = await got.promise;
      assert.equal(d.headers?.traceparent, carrier.traceparent);
      const [publish] = await ended('publish t', 1);
      assert.equal(publish!.kind, SpanKind.CLIENT);
      assert.equal(publish!.links[0]?.context.spanId, spanId(earlier));
      const [process] = await ended('process t', 1);
      assert.equal(process!.links[0]?.context.spanId, spanId(earlier));
    });

    it('a handler given up at close ends its span as discarded', async () => {
      const { q } = await e.instance(traced);
      const started = deferred();
      const sub = await q.subscribe('t', 'g', async (_d, signal) => {
        started.resolve();
        await new Promise((resolve) => signal.addEventListener('abort', resolve));
      }, FAST);
      await q.publish({ topic: 't', payload: enc('x') });
      await started.promise;
      await sub.close({ timeoutMs: 20 });
      const [process] = await ended('process t', 1);
      assert.equal(process!.attributes['messaging.ferry.outcome'], 'discard');
      assert.equal(process!.status.code, SpanStatusCode.UNSET);
    });

    it('concurrent publishes from different active spans each carry their own context, and concurrent handlers keep their spans apart', async () => {
      const { q } = await e.instance(traced);
      const n = 24;
      const requests = Array.from({ length: n }, (_, i) => app.startSpan(`request ${i}`));
      const got: Delivery[] = [];
      await q.subscribe('t', 'g', async (d) => {
        got.push(d);
        const i = Number(dec(d.payload));
        // Interleave with the other handlers before and after starting a span of its own.
        await sleep((i * 7) % 5);
        const work = app.startSpan(`work ${i}`);
        await sleep((i * 3) % 4);
        work.end();
      }, { ...FAST, concurrency: 8 });
      const ids = await Promise.all(requests.map((r, i) => within(r, () => q.publish({ topic: 't', payload: enc(String(i)) }))));
      for (const r of requests) r.end();
      await waitFor(() => finished('process t').length === n && got.length === n, 5000, 'every handler');
      const publishes = finished('publish t');
      const processes = finished('process t');
      for (let i = 0; i < n; i++) {
        const id = ids[i]![0]!;
        const publish = publishes.find((p) => p.attributes['messaging.message.id'] === id)!;
        assert.equal(publish.parentSpanContext?.spanId, spanId(requests[i]!), `publish ${i} is a child of its own request`);
        const d = got.find((x) => x.id === id)!;
        assert.equal(d.headers?.traceparent?.split('-')[1], requests[i]!.spanContext().traceId, `message ${i} carries its request's trace`);
        assert.equal(parentIdOf(d.headers?.traceparent), spanId(publish));
        const process = processes.find((p) => p.attributes['messaging.message.id'] === id)!;
        assert.equal(process.links[0]?.context.spanId, spanId(publish));
        const [work] = finished(`work ${i}`);
        assert.equal(work!.parentSpanContext?.spanId, spanId(process), `work ${i} is a child of its own process span`);
      }
    });

    it('tracing off: no headers are added and no spans are made, with a provider registered globally', async () => {
      trace.setGlobalTracerProvider(provider);
      try {
        const { q } = await e.instance();
        const got = deferred<Delivery>();
        await q.subscribe('t', 'g', async (d) => {
          got.resolve(d);
        }, FAST);
        const request = app.startSpan('request');
        await within(request, () => q.publish({ topic: 't', payload: enc('x') }));
        request.end();
        const d = await got.promise;
        assert.equal(d.headers, undefined);
        await sleep(20);
        assert.deepEqual(exporter.getFinishedSpans().map((s) => s.name), ['request']);
      } finally {
        trace.disable();
      }
    });
  });
}

describe('tracing configuration', () => {
  it('tracing: true uses the globally registered tracer provider', async () => {
    trace.setGlobalTracerProvider(provider);
    const q = createStoreQueue(new MemoryStore(), { tracing: true });
    try {
      await q.publish({ topic: 't', payload: enc('x') });
      assert.equal(finished('publish t').length, 1);
    } finally {
      await q.close();
      trace.disable();
    }
  });

  it('a JSON config turns it on with tracing: true, and deps.tracing can give the provider', async () => {
    trace.setGlobalTracerProvider(provider);
    const fromJson = await createQueue({ type: 'memory', config: { tracing: true } });
    const fromDeps = await createQueue({ type: 'memory', config: { tracing: false } }, { tracing: { tracerProvider: provider } });
    try {
      await fromJson.publish({ topic: 'json', payload: enc('x') });
      await fromDeps.publish({ topic: 'deps', payload: enc('x') });
      assert.equal(finished('publish json').length, 1);
      assert.equal(finished('publish deps').length, 1);
    } finally {
      await fromJson.close();
      await fromDeps.close();
      trace.disable();
    }
    await assert.rejects(createQueue({ type: 'memory', config: { tracing: 'on' } }), (err) => err instanceof InvalidArgumentError && /tracing must be a boolean/.test(err.message));
  });

  it('refuses a malformed tracing option', () => {
    const refused = (tracing: unknown, pattern: RegExp) =>
      assert.throws(() => createStoreQueue(new MemoryStore(), { tracing } as never), (err) => err instanceof InvalidArgumentError && pattern.test(err.message));
    refused('yes', /tracing must be a boolean or an object/);
    refused({ tracerProvider: {} }, /tracerProvider must be an OpenTelemetry TracerProvider/);
    refused({ sampler: 1 }, /unknown tracing option "sampler"/);
    refused({ createSpans: 'no' }, /tracing.createSpans must be a boolean/);
  });

  it('a publish the store refuses ends its span with the error', async () => {
    class RefusingStore extends MemoryStore {
      override async append(_msgs: StoredMessage[]): Promise<void> {
        throw new RangeError('store refuses');
      }
    }
    const retried: string[] = [];
    const q = createStoreQueue(new RefusingStore(), { ...traced, onError: (_err, op) => retried.push(op) });
    try {
      await assert.rejects(q.publish({ topic: 't', payload: enc('x') }), /store refuses/);
      const [publish] = finished('publish t');
      assert.deepEqual(publish!.status, { code: SpanStatusCode.ERROR, message: 'store refuses' });
      assert.equal(publish!.attributes['error.type'], 'RangeError');
      assert.equal(finished('publish t').length, 1, 'one span for the call, its retries inside it');
      assert.ok(retried.length > 0);
    } finally {
      await q.close();
    }
  });

  it('off, @opentelemetry/api is never loaded; on, it is loaded when the queue is built', () => {
    assert.deepEqual(childReport('tracing-lazy-load.ts'), { afterUntracedRun: false, headers: null, afterTracedQueue: true });
  });

  it('without @opentelemetry/api installed, an untraced queue works and building a traced one throws UnsupportedError', () => {
    const out = childReport('tracing-without-api.ts') as { untraced: string; traced: { name: string; code: string; message: string; cause: string } };
    assert.equal(out.untraced, 'published');
    assert.equal(out.traced.name, 'UnsupportedError');
    assert.equal(out.traced.code, 'ERR_UNSUPPORTED');
    assert.match(out.traced.message, /tracing is on but @opentelemetry\/api could not be loaded/);
    assert.equal(out.traced.cause, 'MODULE_NOT_FOUND');
  });
});
