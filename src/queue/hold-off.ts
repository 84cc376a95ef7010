/**
 * The wait of a subscription whose claim the rate limit cut short. The store
 * may say how long until the group's window has room again
 * (`ClaimRequest.onRateLimited`); until then no claim can start anything, so
 * the poll loop sleeps that long and no wake-up (a publish, an ack, the
 * poller) ends the sleep early. Closing the subscription does.
 */
import type { RateLimit } from './options.js';
import { MAX_TIMER_MS } from './options.js';
import { WAKE_MARGIN_MS } from './wake-timer.js';

/**
 * How long to hold off, ms, for a store's `waitMs`: at least 1 ms and at
 * most the window (a store's odd answer never stalls a subscription longer),
 * plus the margin by which the store's clock may run behind ours, never
 * past the longest delay a Node timer takes.
 */
export function holdOffMs(waitMs: number, limit: RateLimit): number {
  const ms = Number.isFinite(waitMs) ? Math.min(Math.max(waitMs, 1), limit.intervalMs) : limit.intervalMs;
  return Math.min(ms + WAKE_MARGIN_MS, MAX_TIMER_MS); // a Node timer fires at once past MAX_TIMER_MS
}

export class HoldOff {
  #end: (() => void) | undefined;
  #ended = false;

  /** Resolves after `ms`, or at once once `end` has been called. */
  wait(ms: number): Promise<void> {
    if (this.#ended) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => this.#end?.(), ms);
      this.#end = () => {
        clearTimeout(timer);
        this.#end = undefined;
        resolve();
      };
    });
  }

  /** Ends the wait in progress and every later one (the subscription is closing). */
  end(): void {
    this.#ended = true;
    this.#end?.();
  }
}
