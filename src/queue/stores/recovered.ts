/**
 * The rule that keeps a crash loop to the delivery that causes it. A
 * delivery whose lease expired with no outcome written may have crashed its
 * holder; if it came back in a batch, a second crash would spend the
 * attempts of every delivery claimed beside it, whose handlers may never have
 * started. So a claim takes such a delivery alone, and stops before one that
 * is not first (see `Store.claim`).
 */

/**
 * Of the due candidates of a claim, in publish order, the ones it takes:
 * the first alone when `recovered` says its lease expired, else every one
 * before the first such.
 */
export function takeClaimable<T>(due: T[], recovered: (row: T) => boolean): T[] {
  if (due.length === 0) return due;
  if (recovered(due[0]!)) return due.slice(0, 1);
  const stop = due.findIndex(recovered);
  return stop === -1 ? due : due.slice(0, stop);
}
