/**
 * Counting events in sliding windows, for the rate-limit tests: the most
 * events any window of a given width holds. The busiest window starts at
 * an event, so checking the window at each event covers every window.
 */

/** The most of the instants `at` (sorted ascending, any unit) within any half-open window [t, t + width). */
export function busiestWindow(at: readonly number[], width: number): number {
  let worst = 0;
  for (let i = 0, j = 0; i < at.length; i++) {
    while (at[i]! - at[j]! >= width) j++;
    worst = Math.max(worst, i - j + 1);
  }
  return worst;
}
