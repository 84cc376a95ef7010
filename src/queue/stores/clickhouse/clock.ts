/**
 * The database clock, in milliseconds. Leases, due times and backoffs are
 * deadlines on the server's clock, so instances whose own clocks disagree
 * still agree on when a lease ends.
 *
 * ClickHouse 18.16 has no sub-second clock function (`now64` came later):
 * `now()` is whole seconds. A one-second clock cannot time a 300 ms lease, so
 * the store keeps an estimate of the offset between the server's clock and
 * this process's monotonic clock: each reading of `now()` taken between local
 * times t0 and t1 says the offset lies in `[S·1000 − t1, S·1000 + 1000 − t0]`,
 * and the readings' intersection narrows to a few milliseconds as soon as one
 * of them straddles a second boundary. `calibrate` samples until the window is
 * narrow; every locked operation reads the server clock again (`observe`), so
 * a server clock that drifts or steps is followed (a reading that disagrees
 * slides the window the least distance that reconciles them). On a server with `now64` the readings are milliseconds already
 * and one reading suffices.
 */
import { performance } from 'node:perf_hooks';

/** Calibration stops once the offset is known to within this many milliseconds… */
const TARGET_WIDTH_MS = 16;
/** …or after this long. */
const CALIBRATE_BUDGET_MS = 1500;
/** Spacing of calibration readings. */
const SAMPLE_EVERY_MS = 7;

export class ServerClock {
  #lo = -Infinity;
  #hi = Infinity;

  /** `resolutionMs`: 1000 for `now()` (seconds), 1 for a millisecond clock. */
  constructor(readonly resolutionMs: number) {}

  /** Records that the server's clock read `reading` (in units of the resolution) between local monotonic times `t0` and `t1`. */
  observe(reading: number, t0: number, t1: number): void {
    const lo = reading * this.resolutionMs - t1;
    const hi = reading * this.resolutionMs + this.resolutionMs - t0;
    if (!Number.isFinite(this.#lo)) {
      this.#lo = lo;
      this.#hi = hi;
      return;
    }
    if (lo > this.#hi || hi < this.#lo) {
      // The server clock moved against ours (drift, or a step): slide the
      // window the least distance that makes it agree with this reading.
      const width = this.#hi - this.#lo;
      if (lo > this.#hi) [this.#lo, this.#hi] = [lo, Math.min(hi, lo + width)];
      else [this.#lo, this.#hi] = [Math.max(lo, hi - width), hi];
      return;
    }
    this.#lo = Math.max(this.#lo, lo);
    this.#hi = Math.min(this.#hi, hi);
  }

  /** How far the estimate may be off, in milliseconds (half the offset window). */
  get uncertaintyMs(): number {
    return (this.#hi - this.#lo) / 2;
  }

  /** The server's time now, in integer milliseconds since the epoch (estimated). */
  now(): number {
    return Math.round(performance.now() + (this.#lo + this.#hi) / 2);
  }

  /** Samples `read` (a round trip returning the server's reading) until the window is narrow or the budget is spent. */
  async calibrate(read: () => Promise<number>): Promise<void> {
    const start = performance.now();
    do {
      const t0 = performance.now();
      const reading = await read();
      this.observe(reading, t0, performance.now());
      if (this.uncertaintyMs * 2 <= TARGET_WIDTH_MS) return;
      await new Promise((r) => setTimeout(r, SAMPLE_EVERY_MS));
    } while (performance.now() - start < CALIBRATE_BUDGET_MS);
  }
}
