/**
 * The queue's metrics in a prom-client registry the caller owns. prom-client
 * is an optional peer dependency: it is loaded only when this adapter runs
 * (or passed in as `client`).
 */
import type { Registry } from 'prom-client';
import { InvalidArgumentError } from '../errors.js';
import type { CompletedEvent, DeadLetteredEvent, LeaseLostEvent, RetryingEvent } from '../queue/events.js';
import { knownKeys, rejectUnknownKeys } from '../known-keys.js';
import { checkBuckets, checkSource, seconds, snapshotter } from './source.js';
import type { MetricsSource, ObservedGroups } from './source.js';

type PromClient = typeof import('prom-client');

/** What a Prometheus metric name may hold; a prefix is its start. */
const METRIC_NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;


/** Options of `prometheusMetrics`. */
export interface PrometheusMetricsOptions {
  /** The registry the metrics go to (yours; `prom-client`'s global `register` works too). */
  registry: Registry;
  /** Pairs whose gauges are reported, read with `queue.stats` at each scrape. Default none (counters and histogram only). */
  groups?: ObservedGroups;
  /** Prefix of every metric name. Default `ferry_queue_`. */
  prefix?: string;
  /** Buckets of the handler-duration histogram, seconds. Default `DEFAULT_DURATION_BUCKETS`. */
  buckets?: number[];
  /** The prom-client module to build metrics with. Default: `import('prom-client')`. */
  client?: PromClient;
}

/** Every key of `PrometheusMetricsOptions`; anything else is refused. */
const PROMETHEUS_OPTION_KEYS = knownKeys<PrometheusMetricsOptions>({ registry: true, groups: true, prefix: true, buckets: true, client: true });

/** Metrics attached to a queue; `close` detaches them. */
export interface QueueMetrics {
  /** Stops listening to the queue and removes the metrics (from the registry, or the meter's callbacks). Idempotent. */
  close(): void;
}

/**
 * Reports `queue` in `opts.registry`. Label names: `topic`, `group`, and
 * `reason` / `outcome` where given. Metrics (with the default prefix):
 *
 * - gauges, per observed (topic, group), read at scrape time:
 *   `ferry_queue_pending`, `ferry_queue_leased`, `ferry_queue_dead`,
 *   `ferry_queue_oldest_pending_age_seconds`;
 * - counters: `ferry_queue_completed_total`, `ferry_queue_retried_total`,
 *   `ferry_queue_dead_lettered_total` (label `reason`, see
 *   `DeadLetterReason`), `ferry_queue_leases_lost_total`;
 * - histogram `ferry_queue_handler_duration_seconds` (label `outcome`:
 *   `completed`, `retried`, `dead_lettered`).
 *
 * Counters count this process's outcomes (from the queue's events), the
 * gauges the whole group as the store sees it. Rejects with
 * `InvalidArgumentError` for a bad option or a metric name the registry
 * already has, and with the import error when prom-client is not installed.
 */
export async function prometheusMetrics(queue: MetricsSource, opts: PrometheusMetricsOptions): Promise<QueueMetrics> {
  const source = checkSource(queue);
  if (typeof opts !== 'object' || opts === null || typeof opts.registry?.registerMetric !== 'function') {
    throw new InvalidArgumentError('prometheusMetrics: registry must be a prom-client Registry');
  }
  rejectUnknownKeys('prometheusMetrics option', opts, PROMETHEUS_OPTION_KEYS);
  const prefix = opts.prefix ?? 'ferry_queue_';
  if (typeof prefix !== 'string' || !METRIC_NAME.test(prefix)) {
    throw new InvalidArgumentError(`prometheusMetrics: prefix must start a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), got ${JSON.stringify(prefix)}`);
  }
  const buckets = checkBuckets('prometheusMetrics', opts.buckets);
  const { registry } = opts;
  const client: PromClient = opts.client ?? (await import('prom-client'));
  const names = ['pending', 'leased', 'dead', 'oldest_pending_age_seconds', 'completed_total', 'retried_total', 'dead_lettered_total', 'leases_lost_total', 'handler_duration_seconds'].map((n) => prefix + n);
  for (const n of names) {
    if (registry.getSingleMetric(n)) throw new InvalidArgumentError(`prometheusMetrics: the registry already has ${n}`);
  }
  const snapshot = snapshotter(source, opts.groups ?? []);
  const registers = [registry];
  const labelNames = ['topic', 'group'] as const;

  const gauge = (name: string, help: string, read: (s: { pending: number; leased: number; dead: number; oldestPendingAgeMs: number }) => number) =>
    new client.Gauge({
      name: prefix + name,
      help,
      labelNames,
      registers,
      async collect() {
        const snap = await snapshot();
        this.reset();
        for (const { topic, group, stats } of snap) if (stats) this.set({ topic, group }, read(stats));
      },
    });
  gauge('pending', 'Deliveries waiting to be claimed (due, scheduled, in backoff, behind their key, or with an expired lease).', (s) => s.pending);
  gauge('leased', 'Deliveries held under an unexpired lease.', (s) => s.leased);
  gauge('dead', 'Dead-lettered deliveries not yet purged.', (s) => s.dead);
  gauge('oldest_pending_age_seconds', 'How long the longest-waiting due delivery has been claimable, seconds.', (s) => s.oldestPendingAgeMs / 1000);

  const completed = new client.Counter({ name: `${prefix}completed_total`, help: 'Deliveries acknowledged by this process.', labelNames, registers });
  const retried = new client.Counter({ name: `${prefix}retried_total`, help: 'Failed handler runs scheduled for a retry by this process.', labelNames, registers });
  const dead = new client.Counter({
    name: `${prefix}dead_lettered_total`, help: 'Deliveries dead-lettered by this process.', labelNames: ['topic', 'group', 'reason'] as const, registers,
  });
  const lost = new client.Counter({ name: `${prefix}leases_lost_total`, help: 'Leases this process lost while holding a delivery.', labelNames, registers });
  const duration = new client.Histogram({
    name: `${prefix}handler_duration_seconds`,
    help: 'Time handlers ran, seconds, by outcome.',
    labelNames: ['topic', 'group', 'outcome'] as const,
    buckets,
    registers,
  });

  const onCompleted = (e: CompletedEvent) => {
    completed.inc({ topic: e.topic, group: e.group });
    duration.observe({ topic: e.topic, group: e.group, outcome: 'completed' }, e.durationMs / 1000);
  };
  const onRetrying = (e: RetryingEvent) => {
    retried.inc({ topic: e.topic, group: e.group });
    duration.observe({ topic: e.topic, group: e.group, outcome: 'retried' }, e.durationMs / 1000);
  };
  const onDead = (e: DeadLetteredEvent) => {
    dead.inc({ topic: e.topic, group: e.group, reason: e.reason });
    const s = seconds(e.durationMs);
    if (s !== undefined) duration.observe({ topic: e.topic, group: e.group, outcome: 'dead_lettered' }, s);
  };
  const onLost = (e: LeaseLostEvent) => lost.inc({ topic: e.topic, group: e.group });
  source.on('completed', onCompleted).on('retrying', onRetrying).on('deadLettered', onDead).on('leaseLost', onLost);

  let closed = false;
  return {
    close() {
      if (closed) return;
      closed = true;
      source.off('completed', onCompleted).off('retrying', onRetrying).off('deadLettered', onDead).off('leaseLost', onLost);
      for (const n of names) registry.removeSingleMetric(n);
    },
  };
}
