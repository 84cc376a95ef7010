/**
 * A clock for the scheduler that moves only when a test moves it, so a test
 * can walk a schedule through a day or a daylight-saving change tick by
 * tick without waiting, and knows when each scheduler round has finished:
 * a round always ends by setting its next timer.
 */
import type { ScheduleClock } from '../../src/queue/schedules/clock.js';

interface Timer {
  at: number;
  fn: () => void;
}

export class FakeClock implements ScheduleClock {
  #now: number;
  readonly #timers = new Set<Timer>();

  constructor(start: number) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimer(fn: () => void, ms: number): { cancel(): void } {
    const t: Timer = { at: this.#now + Math.max(0, ms), fn };
    this.#timers.add(t);
    return { cancel: () => void this.#timers.delete(t) };
  }

  /** Timers set and not yet fired or cancelled: one per scheduler between its rounds. */
  get pending(): number {
    return this.#timers.size;
  }

  /** The earliest pending timer's time, if any. */
  get nextAt(): number | undefined {
    let at: number | undefined;
    for (const t of this.#timers) if (at === undefined || t.at < at) at = t.at;
    return at;
  }

  /** Sets the time to `at` (never back) and fires every timer due by then, earliest first. */
  set(at: number): void {
    if (at < this.#now) throw new Error(`the fake clock does not go back (${at} < ${this.#now})`);
    this.#now = at;
    const due = [...this.#timers].filter((t) => t.at <= at).sort((a, b) => a.at - b.at);
    for (const t of due) {
      this.#timers.delete(t);
      t.fn();
    }
  }

  advance(ms: number): void {
    this.set(this.#now + ms);
  }
}
