/**
 * What a capped or rate-limited claim of the Postgres store may lease, from
 * the counts claim-budget.sql read under the group's row lock, and, once it
 * has claimed, whether the rate limit kept it short (`ClaimRequest.onRateLimited`).
 */
import type { ClaimRequest } from '../../types.js';

/** The row of claim-budget.sql. */
export interface BudgetRow {
  in_flight: number;
  started: number;
  /** ms from the count until the oldest claim of the window leaves it; null when the window holds none. */
  room_in_ms: number | null;
}

export interface ClaimLimit {
  /** Most deliveries the claim may lease; none when 0 or less. */
  limit: number;
  /**
   * After the claim leased `leased`: how long (ms, 1 to the interval) until
   * the window has room again when the rate limit is what kept the claim
   * short (it took all the room the window had, less than it would have
   * taken otherwise); undefined when it was not.
   */
  rateWait(leased: number): number | undefined;
}

export function claimLimit(req: ClaimRequest, b: BudgetRow): ClaimLimit {
  const unlimited = req.maxInFlight > 0 ? Math.min(req.max, req.maxInFlight - b.in_flight) : req.max;
  const rl = req.rateLimit;
  if (rl === undefined) return { limit: unlimited, rateWait: () => undefined };
  const room = rl.max - b.started;
  return {
    limit: Math.min(unlimited, room),
    rateWait(leased) {
      if (room >= unlimited || leased < Math.max(room, 0)) return undefined;
      // The window's oldest claim leaves first; with none before, this claim's own.
      const ms = b.room_in_ms ?? rl.intervalMs;
      return Math.min(Math.max(Math.ceil(ms), 1), rl.intervalMs);
    },
  };
}
