/**
 * What the memory store keeps for one consumer group of a topic: its live
 * (pending and leased) deliveries in the order a claim considers them, its
 * pause flag, and the claim starts its rate limit counts.
 *
 * Claim order is priority, highest first, then publish order. The live
 * deliveries sit in one `Set` per priority, each in publish order
 * (deliveries are only ever added at the end: by an append, or by an
 * `earliest` backfill while the group has none), and the priorities present
 * are kept sorted, so a claim walks the sets from the highest priority down
 * and never sorts the backlog. With every message at the default priority
 * there is one set, walked in publish order as before priorities existed.
 *
 * A keyed delivery may be claimed only at the head of its key lane: the
 * first live delivery of its key in publish order, whatever the priorities
 * of the ones behind it. One more `Set` per key, in publish order, says
 * which delivery that is.
 */
import type { RateLimit } from '../types.js';

/** The fields of a live delivery the group's order depends on. */
export interface Ordered {
  readonly priority: number;
  readonly key: string | undefined;
}

export class GroupDeliveries<D extends Ordered> {
  /** Set by `Store.setGroupPaused`: claims lease nothing, `duePairs` leaves the group out. */
  paused = false;
  readonly #byPriority = new Map<number, Set<D>>();
  /** The keys of `#byPriority`, highest first. */
  #priorities: number[] = [];
  /** Live keyed deliveries per key, in publish order: the first is the lane's head. */
  readonly #byKey = new Map<string, Set<D>>();
  /** Start times (store clock, ms) of the claims under a rate limit still in its window, oldest first. */
  #starts: number[] = [];

  /** Adds `d` behind every live delivery of its priority and of its key. */
  add(d: D): void {
    let set = this.#byPriority.get(d.priority);
    if (!set) {
      this.#byPriority.set(d.priority, (set = new Set()));
      const i = this.#priorities.findIndex((p) => p < d.priority);
      this.#priorities.splice(i === -1 ? this.#priorities.length : i, 0, d.priority);
    }
    set.add(d);
    if (d.key === undefined) return;
    let lane = this.#byKey.get(d.key);
    if (!lane) this.#byKey.set(d.key, (lane = new Set()));
    lane.add(d);
  }

  /** Removes `d` (it was acknowledged or died). */
  delete(d: D): void {
    const set = this.#byPriority.get(d.priority);
    if (!set?.delete(d)) return;
    if (set.size === 0) {
      this.#byPriority.delete(d.priority);
      this.#priorities.splice(this.#priorities.indexOf(d.priority), 1);
    }
    if (d.key === undefined) return;
    const lane = this.#byKey.get(d.key)!;
    lane.delete(d);
    if (lane.size === 0) this.#byKey.delete(d.key);
  }

  /** Whether `d` may be claimed as far as its key goes: unkeyed, or the head of its lane. */
  isHead(d: D): boolean {
    return d.key === undefined || this.#byKey.get(d.key)!.values().next().value === d;
  }

  /** Every live delivery in claim order: priority, highest first, then publish order. */
  *[Symbol.iterator](): Generator<D> {
    for (const p of this.#priorities) {
      const set = this.#byPriority.get(p);
      if (set) yield* set;
    }
  }

  /** How many claims may start at `now` under `limit`: `max` minus the starts in the window ending at `now`. Forgets older starts. */
  rateRoom(limit: RateLimit, now: number): number {
    const cutoff = now - limit.intervalMs;
    let old = 0;
    while (old < this.#starts.length && this.#starts[old]! <= cutoff) old++;
    if (old > 0) this.#starts.splice(0, old);
    return Math.max(0, limit.max - this.#starts.length);
  }

  /** Records `n` claims started at `now`. */
  recordStarts(now: number, n: number): void {
    const last = this.#starts.at(-1);
    for (let i = 0; i < n; i++) this.#starts.push(now);
    // A clock that stepped back: keep the list sorted, oldest first.
    if (last !== undefined && last > now) this.#starts.sort((a, b) => a - b);
  }

  /** How long after `now` (ms, at least 1) the window has room for one more claim under `limit`. */
  rateWait(limit: RateLimit, now: number): number {
    const inWindow = this.#starts.length;
    if (inWindow < limit.max) return 1;
    // Room comes when all but max - 1 of the starts have left the window.
    const leaving = this.#starts[inWindow - limit.max]!;
    return Math.max(1, leaving + limit.intervalMs - now);
  }
}
