/**
 * `ferry/metrics`: a queue's gauges, counters and handler-duration histogram
 * in a metrics system you already run — a prom-client registry or an
 * OpenTelemetry meter. Neither is imposed: both are optional peer
 * dependencies, loaded only by the adapter that uses them. See docs/QUEUE.md.
 */
export { prometheusMetrics } from './prometheus.js';
export { DEFAULT_DURATION_BUCKETS } from './source.js';
export type { PrometheusMetricsOptions, QueueMetrics } from './prometheus.js';
export { openTelemetryMetrics } from './opentelemetry.js';
export type { OpenTelemetryMetricsOptions } from './opentelemetry.js';
export type { MetricsSource, ObservedGroup, ObservedGroups } from './source.js';
