/**
 * The sliding window of a group's rate limit (`ClaimRequest.rateLimit`) on
 * the ClickHouse store: which of the group's recent claim starts a claim
 * counts, how many deliveries it may still lease, and the starts it records.
 * Pure: the claim (claim.ts) reads the group's `claim_starts` row and writes
 * the next version under the group's lock, so claims of every instance see
 * each other's starts.
 *
 * A claim made at `at` counts every start `s` with `at - s < intervalMs`
 * (the window `(at - intervalMs, at]`, as the memory store counts it),
 * leases at most `max` minus that, and records its deliveries as started at
 * `at`. `at` never
 * goes below the newest recorded start, so starts are recorded in order even
 * when two instances' estimates of the server clock differ by a few
 * milliseconds. Then any window of `intervalMs` holds at most `max` starts:
 * the claim that recorded the window's newest start counted every earlier one
 * inside it.
 */
import type { RateLimit } from '../../types.js';

/** A group's recent claim starts: `counts[i]` deliveries started at `starts[i]` (server ms, ascending). */
export interface ClaimStarts {
  starts: number[];
  counts: number[];
}

/** What a claim under a rate limit may do. */
export interface Window {
  /** The instant the claim's starts are recorded at (server ms). */
  at: number;
  /** How many deliveries the claim may lease (≥ 0). */
  room: number;
  /** The starts still inside the window at `at` (older ones are dropped on the next write). */
  kept: ClaimStarts;
}

/** The window of a claim made at `now` (server ms) on `recent`, under `limit`. */
export function openWindow(recent: ClaimStarts, now: number, limit: RateLimit): Window {
  const newest = recent.starts.length > 0 ? recent.starts[recent.starts.length - 1]! : 0;
  const at = Math.max(now, newest);
  const kept: ClaimStarts = { starts: [], counts: [] };
  let used = 0;
  for (let i = 0; i < recent.starts.length; i++) {
    if (at - recent.starts[i]! >= limit.intervalMs) continue;
    kept.starts.push(recent.starts[i]!);
    kept.counts.push(recent.counts[i]!);
    used += recent.counts[i]!;
  }
  return { at, room: Math.max(0, limit.max - used), kept };
}

/** The starts to record after a claim in `w` leased `n` (≥ 1) deliveries. */
export function recordStarts(w: Window, n: number): ClaimStarts {
  const starts = [...w.kept.starts];
  const counts = [...w.kept.counts];
  if (starts.length > 0 && starts[starts.length - 1] === w.at) counts[counts.length - 1]! += n;
  else (starts.push(w.at), counts.push(n));
  return { starts, counts };
}

/**
 * How long after `at` (ms, 1 to `intervalMs`) the window has room for one
 * more start, given the starts `recent` (all in the window at `at`): until
 * all but `max - 1` of them are `intervalMs` old.
 */
export function rateWait(recent: ClaimStarts, at: number, limit: RateLimit): number {
  let leaving = recent.counts.reduce((sum, n) => sum + n, 0) - (limit.max - 1);
  for (let i = 0; i < recent.starts.length && leaving > 0; i++) {
    leaving -= recent.counts[i]!;
    if (leaving <= 0) return Math.max(1, recent.starts[i]! + limit.intervalMs - at);
  }
  return 1;
}
