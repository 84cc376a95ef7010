/**
 * What tracing costs (suite `queue.memory.publish-consume`): messages/s
 * through a memory-store queue, each published alone (one `publish` call
 * per message, from 64 callers at once, at most 512 unhandled) and handled
 * by an empty handler at concurrency 16, so the figure is the engine's own
 * per-message work:
 *
 * - `queue.memory.publish-consume`: tracing off (the baseline);
 * - `.tracing-noop`: `tracing: true` with `@opentelemetry/api` and no SDK
 *   registered (no-op tracer, propagator and context manager), as in an
 *   application that ships the API but has not set up OpenTelemetry;
 * - `.tracing-sdk`: `tracing: true` with the SDK registered globally (an
 *   AsyncLocalStorage context manager, the W3C propagator, a tracer provider
 *   sampling every span into a batch processor whose exporter drops them):
 *   every publish and handler attempt makes a recorded span and carries a
 *   `traceparent`.
 *
 * The three run in turn, three rounds after a warm-up, and each reports its
 * median round, with its ratio to the untraced median as the figure to quote
 * (the machine is shared, so rates drift between runs while ratios hold).
 */
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { ExportResultCode, W3CTraceContextPropagator } from '@opentelemetry/core';
import type { ExportResult } from '@opentelemetry/core';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import { median, withBaseline } from './harness.js';
import type { BenchContext, BenchSuite } from './harness.js';
import { createStoreQueue } from '../src/queue/engine.js';
import type { EngineConfig } from '../src/queue/options.js';
import { MemoryStore } from '../src/queue/stores/memory.js';

const PAYLOAD = new Uint8Array(256).fill(7);
const OUTSTANDING = 512;
/** Callers publishing at once, each one message per call. */
const PRODUCERS = 64;
const ROUNDS = 3;

/** Takes every span and keeps none: the SDK's work without an exporter's. */
class DroppingExporter implements SpanExporter {
  exported = 0;
  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.exported += spans.length;
    done({ code: ExportResultCode.SUCCESS });
  }
  async shutdown(): Promise<void> {}
}

/** Publishes `total` messages one per call and waits until the handler has seen each; messages/s. */
async function publishConsume(total: number, cfg: EngineConfig): Promise<number> {
  const q = createStoreQueue(new MemoryStore(), cfg);
  try {
    let handled = 0;
    let allDone!: () => void;
    const done = new Promise<void>((resolve) => (allDone = resolve));
    await q.subscribe('bench', 'g', async () => {
      if (++handled === total) allDone();
    }, { concurrency: 16, batchSize: 32 });
    const start = performance.now();
    let next = 0;
    const producer = async () => {
      while (next < total) {
        next++;
        while (next - handled > OUTSTANDING) await new Promise((r) => setTimeout(r, 1));
        await q.publish({ topic: 'bench', payload: PAYLOAD });
      }
    };
    await Promise.all(Array.from({ length: PRODUCERS }, producer));
    await done;
    return total / ((performance.now() - start) / 1000);
  } finally {
    await q.close();
  }
}

/** Registers the SDK globally for the length of `fn`, as an application's OpenTelemetry set-up would. */
async function withSdk<T>(fn: () => Promise<T>): Promise<T> {
  const exporter = new DroppingExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  try {
    return await fn();
  } finally {
    await provider.shutdown();
    trace.disable();
    propagation.disable();
    context.disable();
  }
}


export const suite: BenchSuite = {
  name: 'queue.memory.publish-consume',
  async run(ctx: BenchContext) {
    const total = Math.max(2000, Math.round(20_000 * ctx.scale));
    const variants: Array<{ name: string; run: () => Promise<number> }> = [
      { name: 'queue.memory.publish-consume', run: () => publishConsume(total, {}) },
      { name: 'queue.memory.publish-consume.tracing-noop', run: () => publishConsume(total, { tracing: true }) },
      { name: 'queue.memory.publish-consume.tracing-sdk', run: () => withSdk(() => publishConsume(total, { tracing: true })) },
    ];
    for (const v of variants) await v.run(); // warm-up
    const rates = variants.map(() => [] as number[]);
    for (let round = 0; round < ROUNDS; round++) {
      for (const [i, v] of variants.entries()) rates[i]!.push(await v.run());
    }
    const off = median(rates[0]!);
    ctx.report({ name: variants[0]!.name, unit: 'msgs/s', value: off, extra: { messages: total } });
    for (const [i, v] of variants.entries()) {
      if (i > 0) ctx.report(withBaseline(v.name, 'msgs/s', median(rates[i]!), off, { messages: total }));
    }
  },
};
