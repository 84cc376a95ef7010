/**
 * The queue's metrics through an OpenTelemetry meter the caller owns.
 * `@opentelemetry/api` is an optional peer dependency, used for types only.
 */
import type { Attributes, BatchObservableCallback, Meter, Observable } from '@opentelemetry/api';
import { InvalidArgumentError } from '../errors.js';
import type { CompletedEvent, DeadLetteredEvent, LeaseLostEvent, RetryingEvent } from '../queue/events.js';
import type { QueueMetrics } from './prometheus.js';
import { knownKeys, rejectUnknownKeys } from '../known-keys.js';
import { checkBuckets, checkSource, seconds, snapshotter } from './source.js';
import type { MetricsSource, ObservedGroups } from './source.js';

/** Options of `openTelemetryMetrics`. */
export interface OpenTelemetryMetricsOptions {
  /** The meter instruments are created on, e.g. `metrics.getMeter('ferry')`. */
  meter: Meter;
  /** Pairs whose gauges are reported, read with `queue.stats` at each collection. Default none. */
  groups?: ObservedGroups;
  /** Prefix of every instrument name: empty, or a letter then letters, digits, `_`, `.`, `-` or `/`. Default `ferry.queue.`. */
  prefix?: string;
  /** Bucket boundaries of the handler-duration histogram, seconds, given to the SDK as advice. Default `DEFAULT_DURATION_BUCKETS`. */
  buckets?: number[];
}

/** Every key of `OpenTelemetryMetricsOptions`; anything else is refused. */
const OTEL_OPTION_KEYS = knownKeys<OpenTelemetryMetricsOptions>({ meter: true, groups: true, prefix: true, buckets: true });

/** What may start an OpenTelemetry instrument name (the empty prefix included). */
const INSTRUMENT_PREFIX = /^(?:[A-Za-z][A-Za-z0-9_.\-/]*)?$/;

/** The attributes naming a (topic, group), after OpenTelemetry's messaging conventions. */
function attrs(topic: string, group: string): Attributes {
  return { 'messaging.destination.name': topic, 'messaging.consumer.group.name': group };
}

/**
 * Reports `queue` through `opts.meter`. Instruments (with the default
 * prefix), each with the attributes `messaging.destination.name` (topic) and
 * `messaging.consumer.group.name` (group):
 *
 * - observable gauges, per observed pair, read at collection time:
 *   `ferry.queue.pending`, `ferry.queue.leased`, `ferry.queue.dead`
 *   (unit `{delivery}`), `ferry.queue.oldest_pending_age` (unit `s`);
 * - counters `ferry.queue.completed`, `ferry.queue.retried`,
 *   `ferry.queue.dead_lettered` (attribute `ferry.dead_letter.reason`),
 *   `ferry.queue.leases_lost`;
 * - histogram `ferry.queue.handler.duration` (unit `s`, attribute
 *   `ferry.outcome`: `completed`, `retried`, `dead_lettered`).
 *
 * Throws `InvalidArgumentError` for a bad option.
 */
export function openTelemetryMetrics(queue: MetricsSource, opts: OpenTelemetryMetricsOptions): QueueMetrics {
  const source = checkSource(queue);
  const meter = opts?.meter;
  if (typeof meter?.createCounter !== 'function' || typeof meter.addBatchObservableCallback !== 'function') {
    throw new InvalidArgumentError('openTelemetryMetrics: meter must be an OpenTelemetry Meter');
  }
  rejectUnknownKeys('openTelemetryMetrics option', opts, OTEL_OPTION_KEYS);
  const p = opts.prefix ?? 'ferry.queue.';
  if (typeof p !== 'string' || !INSTRUMENT_PREFIX.test(p)) {
    throw new InvalidArgumentError(`openTelemetryMetrics: prefix must start an instrument name (a letter, then letters, digits, _ . - /), got ${JSON.stringify(p)}`);
  }
  const buckets = checkBuckets('openTelemetryMetrics', opts.buckets);
  const snapshot = snapshotter(source, opts.groups ?? []);
  const pending = meter.createObservableGauge(`${p}pending`, { description: 'Deliveries waiting to be claimed.', unit: '{delivery}' });
  const leased = meter.createObservableGauge(`${p}leased`, { description: 'Deliveries held under an unexpired lease.', unit: '{delivery}' });
  const deadNow = meter.createObservableGauge(`${p}dead`, { description: 'Dead-lettered deliveries not yet purged.', unit: '{delivery}' });
  const age = meter.createObservableGauge(`${p}oldest_pending_age`, { description: 'How long the longest-waiting due delivery has been claimable.', unit: 's' });
  const observables: Observable[] = [pending, leased, deadNow, age];
  const collect: BatchObservableCallback = async (result) => {
    for (const { topic, group, stats } of await snapshot()) {
      if (!stats) continue;
      const a = attrs(topic, group);
      result.observe(pending, stats.pending, a);
      result.observe(leased, stats.leased, a);
      result.observe(deadNow, stats.dead, a);
      result.observe(age, stats.oldestPendingAgeMs / 1000, a);
    }
  };
  meter.addBatchObservableCallback(collect, observables);

  const completed = meter.createCounter(`${p}completed`, { description: 'Deliveries acknowledged by this process.', unit: '{delivery}' });
  const retried = meter.createCounter(`${p}retried`, { description: 'Failed handler runs scheduled for a retry by this process.', unit: '{delivery}' });
  const dead = meter.createCounter(`${p}dead_lettered`, { description: 'Deliveries dead-lettered by this process.', unit: '{delivery}' });
  const lost = meter.createCounter(`${p}leases_lost`, { description: 'Leases this process lost while holding a delivery.', unit: '{delivery}' });
  // The SDK's own default boundaries (0, 5, 10, … 10,000) are made for
  // milliseconds: in seconds nearly every run would fall in the first.
  const duration = meter.createHistogram(`${p}handler.duration`, { description: 'Time handlers ran, by outcome.', unit: 's', advice: { explicitBucketBoundaries: buckets } });

  const onCompleted = (e: CompletedEvent) => {
    completed.add(1, attrs(e.topic, e.group));
    duration.record(e.durationMs / 1000, { ...attrs(e.topic, e.group), 'ferry.outcome': 'completed' });
  };
  const onRetrying = (e: RetryingEvent) => {
    retried.add(1, attrs(e.topic, e.group));
    duration.record(e.durationMs / 1000, { ...attrs(e.topic, e.group), 'ferry.outcome': 'retried' });
  };
  const onDead = (e: DeadLetteredEvent) => {
    dead.add(1, { ...attrs(e.topic, e.group), 'ferry.dead_letter.reason': e.reason });
    const s = seconds(e.durationMs);
    if (s !== undefined) duration.record(s, { ...attrs(e.topic, e.group), 'ferry.outcome': 'dead_lettered' });
  };
  const onLost = (e: LeaseLostEvent) => lost.add(1, attrs(e.topic, e.group));
  source.on('completed', onCompleted).on('retrying', onRetrying).on('deadLettered', onDead).on('leaseLost', onLost);

  let closed = false;
  return {
    close() {
      if (closed) return;
      closed = true;
      source.off('completed', onCompleted).off('retrying', onRetrying).off('deadLettered', onDead).off('leaseLost', onLost);
      meter.removeBatchObservableCallback(collect, observables);
    },
  };
}
