/**
 * Retry backoff, capped and exponential, in the two jitter variants ferry
 * uses; each name says which. Equal jitter (the queue's retries) keeps every
 * wait at least half the nominal delay, so a delivery that fails at once is
 * never retried at once. Full jitter (`ferry forward`'s sender) may wait
 * anything from 0 up, which spreads out best many senders that failed
 * together. Both take `random` (a value in [0, 1)) so tests can pin it.
 */

/**
 * Equal jitter: before retrying after the `attempt`-th failure (from 1), wait
 * `d/2 + random · d/2` ms, where `d = min(baseMs · 2^(attempt−1), maxMs)`:
 * a time in [d/2, d]. Bifrost's queue package `SubscribeOptions.Backoff`.
 */
export function equalJitterBackoffMs(attempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const n = Math.max(1, Math.floor(attempt));
  // 2 ** 1100 is Infinity, which min() caps, so huge attempt counts are safe.
  const d = Math.min(baseMs * 2 ** (n - 1), maxMs);
  const half = d / 2;
  return half + random() * half;
}

/**
 * Full jitter: after the `attempt`-th failure (from 1), wait a whole number
 * of ms drawn uniformly from [0, min(capMs, baseMs · 2^(attempt−1))]; the
 * exponent stops growing at 30.
 */
export function fullJitterBackoffMs(attempt: number, baseMs: number, capMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.min(attempt - 1, 30));
  return Math.round(random() * ceiling);
}
