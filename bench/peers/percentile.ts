/** Latency percentiles through hdr-histogram-js (values in ms, recorded in µs). */
import hdr from 'hdr-histogram-js';

export function percentiles(ms: number[]): { p50_ms: number; p99_ms: number } {
  if (ms.length === 0) return { p50_ms: NaN, p99_ms: NaN };
  const h = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: 3 });
  try {
    for (const v of ms) h.recordValue(Math.max(1, Math.round(v * 1000)));
    return { p50_ms: h.getValueAtPercentile(50) / 1000, p99_ms: h.getValueAtPercentile(99) / 1000 };
  } finally {
    h.destroy();
  }
}
