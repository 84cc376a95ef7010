/**
 * Which ticks of one schedule an instance publishes in one round: the
 * decision, apart from the loop that acts on it (scheduler.ts), so it can be
 * checked tick by tick.
 *
 * A schedule's ticks up to its stored `lastTick` (or, before the first, up
 * to when it was stored) are settled. Of the ticks after that, those that
 * came due while this instance was watching (after `awakeSince`) are late,
 * never missed: it publishes every one of them, however late its timer
 * fired, because it was running then. The ones that came due before it
 * started watching, that no instance published, were missed: no instance
 * was running, or none could reach the store. For those the schedule's
 * `catchUp` decides. Instances that make different choices agree anyway:
 * a tick's message ID depends on the schedule and the tick only, so a tick
 * published by two of them is stored once, and one instance's catch-up
 * choice never stops another from publishing the ticks it watched.
 */
import { MAX_CATCH_UP_TICKS } from './spec.js';
import { ticksBetween } from './ticks.js';
import type { Ticks } from './ticks.js';
import type { CatchUp, ScheduleRecord } from './types.js';

/** The missed ticks in `(after, until]` that `catchUp` keeps, oldest first, at `now`. */
export function caughtUp(ticks: Ticks, catchUp: CatchUp, after: number, until: number, now: number): number[] {
  if (catchUp === 'none' || until <= after) return [];
  if (catchUp === 'latest') return ticks.newest(1, after, until);
  const from = catchUp.withinMs === undefined ? after : Math.max(after, now - catchUp.withinMs - 1);
  return from >= until ? [] : ticks.newest(catchUp.maxTicks ?? MAX_CATCH_UP_TICKS, from, until);
}

/**
 * The ticks of `r` to publish at `now`, oldest first.
 *
 * @param ticks the ticks of `r.spec`.
 * @param watched the `now` of this instance's last round that published
 *   `r` (same revision): it settled every tick up to then; undefined when it
 *   has not.
 * @param awakeSince since when this instance has been watching without a
 *   break: ticks after it are late, ticks at or before it were missed.
 */
export function planTicks(r: ScheduleRecord, ticks: Ticks, watched: number | undefined, awakeSince: number, now: number): number[] {
  let through = (r.lastTick ?? r.updatedAt).getTime();
  if (watched !== undefined && watched > through) through = watched;
  const out: number[] = [];
  if (through < awakeSince) {
    const until = Math.min(awakeSince, now);
    out.push(...caughtUp(ticks, r.spec.catchUp, through, until, now));
    through = until;
  }
  out.push(...ticksBetween(ticks, through, now, MAX_CATCH_UP_TICKS));
  return out;
}
