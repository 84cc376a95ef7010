/**
 * The engine's `tracing` option: its shapes and its check. Apart from
 * tracing.ts so that the options (options.ts) can check it without taking in
 * the tracing itself, which needs the queue's types.
 */
import { InvalidArgumentError } from '../errors.js';
import { knownKeys, rejectUnknownKeys } from '../known-keys.js';

/**
 * The part of an OpenTelemetry `TracerProvider` the queue uses: any provider
 * (the SDK's, or `trace.getTracerProvider()`) fits. Typed here so that the
 * queue's declarations do not need `@opentelemetry/api` installed.
 */
export interface TracingProvider {
  getTracer(name: string, version?: string): unknown;
}

/** How the queue traces, when `tracing` is an object rather than `true`. */
export interface TracingOptions {
  /** Where the spans go. Default: the global provider (`trace.getTracerProvider()`), the one the OpenTelemetry SDK registers. */
  tracerProvider?: TracingProvider;
  /**
   * Whether a publish of several messages makes one `create` span per
   * message (whose context that message carries) besides its `publish`
   * span, as the conventions recommend for batches. `false`: only the
   * `publish` span, whose context every message of the call carries.
   * Default true.
   */
  createSpans?: boolean;
  /**
   * Whether each process span is a child of the context its message carries
   * (one trace from publish to handler), rather than the root of a trace of
   * its own, linked to that context. It is linked either way. Default false,
   * as the conventions recommend.
   */
  parentFromMessage?: boolean;
}

/** The `tracing` engine option: `true` for the defaults, an object to choose, `false` or absent for none. */
export type TracingOption = boolean | TracingOptions;

/** Every key of `TracingOptions`; anything else is refused. */
export const TRACING_OPTION_KEYS = knownKeys<TracingOptions>({ tracerProvider: true, createSpans: true, parentFromMessage: true });

/**
 * Checks the `tracing` option. Returns the options to trace with, or
 * `undefined` when tracing is off. Throws `InvalidArgumentError` for a value
 * that is not a boolean or `TracingOptions`.
 */
export function checkTracing(option: unknown): TracingOptions | undefined {
  if (option === undefined || option === false) return undefined;
  if (option === true) return {};
  if (typeof option !== 'object' || option === null || Array.isArray(option)) {
    throw new InvalidArgumentError('tracing must be a boolean or an object of tracing options');
  }
  rejectUnknownKeys('tracing option', option, TRACING_OPTION_KEYS);
  const o = option as TracingOptions;
  if (o.tracerProvider !== undefined && typeof (o.tracerProvider as { getTracer?: unknown } | null)?.getTracer !== 'function') {
    throw new InvalidArgumentError('tracing.tracerProvider must be an OpenTelemetry TracerProvider');
  }
  for (const k of ['createSpans', 'parentFromMessage'] as const) {
    if (o[k] !== undefined && typeof o[k] !== 'boolean') throw new InvalidArgumentError(`tracing.${k} must be a boolean`);
  }
  return o;
}
