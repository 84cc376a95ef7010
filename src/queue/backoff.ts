/**
 * Retry backoff: exponential with "equal jitter", so retries of many
 * deliveries that failed together spread out while each still waits at least
 * half the nominal delay.
 */

/**
 * Delay in milliseconds before retrying a delivery whose `attempt`-th try
 * (1-based) failed: `d = min(baseMs · 2^(attempt−1), maxMs)`, and the result
 * lies in [d/2, d]. `random` returns a value in [0, 1). Bifrost's queue package
 * `SubscribeOptions.Backoff`.
 */
export function retryBackoffMs(attempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const n = Math.max(1, Math.floor(attempt));
  // 2 ** 1100 is Infinity, which min() caps, so huge attempt counts are safe.
  const d = Math.min(baseMs * 2 ** (n - 1), maxMs);
  const half = d / 2;
  return half + random() * half;
}
