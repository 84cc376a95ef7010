/**
 * The clock the scheduler reads and sleeps on. Schedules tick on wall-clock
 * instants, so the scheduler takes its time and its timers from one object
 * that tests replace with a clock they move by hand (a day of ticks, a
 * daylight-saving change) instead of waiting for it.
 */
import { MAX_TIMER_MS } from '../options.js';

/** Time and timers for the scheduler. @internal */
export interface ScheduleClock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /** Calls `fn` once `ms` have passed; with `keepAlive` false the timer does not keep the process running. */
  setTimer(fn: () => void, ms: number, keepAlive: boolean): { cancel(): void };
}

/** `Date.now` and `setTimeout` (a wait past Node's longest timer is cut to it; the scheduler then looks again). @internal */
export const systemClock: ScheduleClock = {
  now: () => Date.now(),
  setTimer(fn, ms, keepAlive) {
    const t = setTimeout(fn, Math.max(0, Math.min(ms, MAX_TIMER_MS)));
    if (!keepAlive) t.unref();
    return { cancel: () => clearTimeout(t) };
  },
};
