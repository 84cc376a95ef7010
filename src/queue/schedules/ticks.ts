/**
 * When a schedule ticks. Ticks are instants (milliseconds since the Unix
 * epoch) that every instance computes alike from the stored spec, so they
 * can name messages: `everyMs` ticks at the multiples of its period since
 * the epoch; `cron` ticks where the expression matches the wall clock of
 * its time zone.
 *
 * Cron expressions are parsed and stepped by croner (zero dependencies,
 * time zones through `Intl`, the DST rules of Vixie cron as documented in
 * its README). With `fixedTimeRule: 'no-wildcard'` an expression whose
 * second, minute and hour fields hold no wildcard or step (`30 2 * * *`,
 * `0 30 2,14 * * *`) is a fixed-time job: a wall time missing on a
 * spring-forward day fires at the first instant after the gap, and one that
 * occurs twice on a fall-back day fires once, at the first occurrence. Any
 * other expression fires at each instant it matches (it skips the gap and
 * fires in both passes of a repeated hour). Croner steps in real time from
 * any instant, so the tick after an instant is the same whichever instance
 * asks.
 */
import { Cron } from 'croner';
import { InvalidArgumentError } from '../../errors.js';
import type { ScheduleSpec } from './types.js';

/** A schedule's ticks. */
export interface Ticks {
  /** The first tick strictly after `after`, or undefined when there is none. */
  next(after: number): number | undefined;
  /** The newest `n` ticks in `(after, until]`, oldest first. */
  newest(n: number, after: number, until: number): number[];
}

/** The latest time a JavaScript `Date` holds, ms since the Unix epoch (ECMA-262 §21.4.1.1). */
export const MAX_DATE_MS = 8.64e15;

/**
 * The ticks of every `everyMs` ms, at its multiples since the epoch; none
 * past what a `Date` holds (a schedule stored before `everyMs` was range
 * checked may have a period that long).
 */
function periodic(everyMs: number): Ticks {
  return {
    next: (after) => {
      const t = (Math.floor(after / everyMs) + 1) * everyMs;
      return t <= MAX_DATE_MS ? t : undefined;
    },
    newest(n, after, until) {
      const last = Math.floor(until / everyMs) * everyMs;
      const first = Math.max((Math.floor(after / everyMs) + 1) * everyMs, last - (n - 1) * everyMs);
      const out: number[] = [];
      for (let t = first; t <= last; t += everyMs) out.push(t);
      return out;
    },
  };
}

/** Five fields, six with seconds, seven with a year; or a nickname such as `@daily`. Croner also takes ISO dates (one-shot jobs), which a schedule is not. */
const CRON_SHAPE = /^(@[a-z]+|\S+(\s+\S+){4,6})$/i;

/**
 * The croner job for `expr` in `timezone` (never started: it only answers
 * questions). Throws `InvalidArgumentError` when the expression does not
 * parse.
 */
function cronJob(expr: string, timezone: string): Cron {
  if (!CRON_SHAPE.test(expr.trim())) {
    throw new InvalidArgumentError(`cron ${JSON.stringify(expr)} must have five to seven fields (or be a nickname such as @daily)`);
  }
  try {
    return new Cron(expr.trim(), { timezone, fixedTimeRule: 'no-wildcard' });
  } catch (err) {
    throw new InvalidArgumentError(`cron ${JSON.stringify(expr)} does not parse: ${(err as Error).message}`);
  }
}

function cronTicks(job: Cron): Ticks {
  return {
    next: (after) => job.nextRun(new Date(after))?.getTime(),
    newest(n, after, until) {
      // previousRuns answers instants strictly before its reference, newest first.
      const out: number[] = [];
      for (const d of job.previousRuns(n, new Date(until + 1))) {
        const t = d.getTime();
        if (t <= after) break;
        out.push(t);
      }
      return out.reverse();
    },
  };
}

/** The ticks of `spec` (already checked by `checkTiming`). */
export function ticksOf(spec: ScheduleSpec): Ticks {
  if (spec.everyMs !== undefined) return periodic(spec.everyMs);
  return cronTicks(cronJob(spec.cron!, spec.timezone ?? 'UTC'));
}

/** Every tick in `(after, until]`, oldest first, at most `limit` of them (the oldest). */
export function ticksBetween(ticks: Ticks, after: number, until: number, limit: number): number[] {
  const out: number[] = [];
  for (let t = ticks.next(after); t !== undefined && t <= until && out.length < limit; t = ticks.next(t)) out.push(t);
  return out;
}

/**
 * The canonical IANA name of `tz` (`europe/berlin` → `Europe/Berlin`).
 * Throws `InvalidArgumentError` for a zone `Intl` does not know.
 */
export function canonicalTimeZone(tz: unknown): string {
  if (typeof tz !== 'string' || tz === '') throw new InvalidArgumentError(`timezone must be an IANA time zone name, got ${JSON.stringify(tz)}`);
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: tz }).resolvedOptions().timeZone;
  } catch {
    throw new InvalidArgumentError(`timezone ${JSON.stringify(tz)} is not an IANA time zone this runtime knows`);
  }
}

/**
 * Checks that `expr` parses in `timezone` and matches again after `now`.
 * Throws `InvalidArgumentError`.
 */
export function checkCron(expr: unknown, timezone: string, now: number): string {
  if (typeof expr !== 'string') throw new InvalidArgumentError(`cron must be a string, got ${typeof expr}`);
  const job = cronJob(expr, timezone);
  if (job.nextRun(new Date(now)) === null) throw new InvalidArgumentError(`cron ${JSON.stringify(expr)} never matches after ${new Date(now).toISOString()}`);
  return expr.trim();
}
