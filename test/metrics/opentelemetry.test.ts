/**
 * ferry/metrics with OpenTelemetry: the same run as the prom-client test,
 * read through @opentelemetry/sdk-metrics with an in-memory exporter.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import type { DataPoint, Histogram } from '@opentelemetry/sdk-metrics';
import { DEFAULT_DURATION_BUCKETS, openTelemetryMetrics } from '../../src/metrics/index.js';
import { InvalidArgumentError, InvalidNameError } from '../../src/errors.js';
import { MemoryStore, createStoreQueue, permanent } from '../../src/queue/index.js';
import { FAST, enc } from '../stores/engine-harness.js';
import { waitFor } from '../stores/helpers.js';

describe('openTelemetryMetrics', () => {
  it('counters, histogram and observable gauges after a run', async () => {
    const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
    const provider = new MeterProvider({ readers: [reader] });
    const q = createStoreQueue(new MemoryStore());
    const metrics = openTelemetryMetrics(q, { meter: provider.getMeter('ferry-test'), groups: [{ topic: 't', group: 'g' }, { topic: 't', group: 'idle' }] });
    await (await q.subscribe('t', 'idle', async () => undefined, FAST)).close();
    await q.subscribe('t', 'g', async (d) => {
      const n = Number(new TextDecoder().decode(d.payload));
      if (n === 9) throw permanent(new Error('nine'));
      if ((n === 3 || n === 6) && d.attempt === 1) throw new Error('first try');
    }, { ...FAST, concurrency: 4, backoffBaseMs: 5, backoffMaxMs: 5 });
    await Promise.all(Array.from({ length: 10 }, (_, i) => q.publish({ topic: 't', payload: enc(String(i)) })));
    await waitFor(async () => {
      const s = await q.stats('t', 'g');
      return s.dead === 1 && s.pending + s.leased === 0;
    }, 5000, 'every outcome');

    await reader.forceFlush();
    const points = new Map<string, DataPoint<unknown>[]>();
    for (const rm of exporter.getMetrics()) for (const sm of rm.scopeMetrics) for (const md of sm.metrics) points.set(md.descriptor.name, md.dataPoints);
    const g = { 'messaging.destination.name': 't', 'messaging.consumer.group.name': 'g' };
    const idle = { 'messaging.destination.name': 't', 'messaging.consumer.group.name': 'idle' };
    const value = (name: string, attrs: Record<string, string>) =>
      points.get(name)?.find((p) => JSON.stringify(p.attributes) === JSON.stringify(attrs))?.value;

    assert.equal(value('ferry.queue.completed', g), 9);
    assert.equal(value('ferry.queue.retried', g), 2);
    assert.equal(value('ferry.queue.dead_lettered', { ...g, 'ferry.dead_letter.reason': 'permanent' }), 1);
    assert.equal((value('ferry.queue.handler.duration', { ...g, 'ferry.outcome': 'completed' }) as Histogram).count, 9);
    // Boundaries in seconds (the SDK's own default is made for milliseconds).
    assert.deepEqual((value('ferry.queue.handler.duration', { ...g, 'ferry.outcome': 'completed' }) as Histogram).buckets.boundaries, DEFAULT_DURATION_BUCKETS);
    assert.equal((value('ferry.queue.handler.duration', { ...g, 'ferry.outcome': 'retried' }) as Histogram).count, 2);
    assert.equal((value('ferry.queue.handler.duration', { ...g, 'ferry.outcome': 'dead_lettered' }) as Histogram).count, 1);
    assert.equal(value('ferry.queue.pending', g), 0);
    assert.equal(value('ferry.queue.dead', g), 1);
    assert.equal(value('ferry.queue.pending', idle), 10);
    assert.equal(value('ferry.queue.leased', idle), 0);
    assert.ok((value('ferry.queue.oldest_pending_age', idle) as number) > 0);

    metrics.close();
    await q.close();
    await provider.shutdown();
  });

  it('refuses bad options at once: groups of the wrong shape, a prefix no instrument name can start with, bad buckets, an unknown key', async () => {
    const q = createStoreQueue(new MemoryStore());
    const provider = new MeterProvider();
    try {
      const meter = provider.getMeter('t');
      for (const groups of ['nope', [{ topic: 't' }], [null]]) {
        assert.throws(() => openTelemetryMetrics(q, { meter, groups } as never), (e) => e instanceof InvalidArgumentError && /groups must be an array of \{ topic, group \}/.test(e.message), JSON.stringify(groups));
      }
      assert.throws(() => openTelemetryMetrics(q, { meter, groups: [{ topic: 't', group: 'a/b' }] }), (e) => e instanceof InvalidNameError && /metrics groups: group name "a\/b"/.test(e.message));
      const bad: Array<[Record<string, unknown>, RegExp]> = [
        [{ prefix: '5' }, /prefix must start an instrument name/],
        [{ prefix: '1abc.' }, /prefix/],
        [{ buckets: [2, 1] }, /buckets must be/],
        [{ buckets: [Number.NaN] }, /buckets/],
        [{ buckets: 'x' }, /buckets/],
        [{ prefx: 'a.' }, /unknown openTelemetryMetrics option "prefx"/],
      ];
      for (const [opts, message] of bad) {
        assert.throws(() => openTelemetryMetrics(q, { meter, ...opts } as never), (e) => e instanceof InvalidArgumentError && message.test(e.message), JSON.stringify(opts));
      }
      openTelemetryMetrics(q, { meter, prefix: '', buckets: [0.5, 1] }).close();
    } finally {
      await q.close();
      await provider.shutdown();
    }
  });
});
