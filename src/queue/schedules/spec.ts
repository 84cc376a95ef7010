/**
 * Turning `Queue.schedule`'s options into the spec a store keeps, and a
 * stored record back into what `listSchedules` reports. The checks here are
 * the schedule's own (timing, catch-up, unknown keys); the message fields
 * (topic, key, headers, payload) are checked by the engine as for a publish.
 *
 * A schedule's revision is a fingerprint of its spec and payload, so
 * scheduling the same options again (every instance declaring its schedules
 * at start-up, say) is recognised by the store as no change and keeps the
 * schedule's progress.
 */
import { createHash } from 'node:crypto';
import { InvalidArgumentError } from '../../errors.js';
import { knownKeys, rejectUnknownKeys } from '../../known-keys.js';
import { shown } from '../../show-value.js';
import { canonicalTimeZone, checkCron, MAX_DATE_MS, ticksOf } from './ticks.js';
import type { CatchUp, ScheduleInfo, ScheduleOptions, ScheduleRecord, ScheduleSpec } from './types.js';

/** Most ticks one catch-up publishes (and the default `maxTicks`). */
export const MAX_CATCH_UP_TICKS = 10_000;
/** Shortest `everyMs`, ms: a schedule is not a way to publish in a tight loop. */
export const MIN_EVERY_MS = 1000;
/** `catchUp` when none is given: one late run rather than a silently lost one (a deploy across a daily tick still runs it). */
export const DEFAULT_CATCH_UP: CatchUp = 'latest';

/** Every key of `ScheduleOptions`; anything else is refused. */
export const SCHEDULE_OPTION_KEYS = knownKeys<ScheduleOptions>({
  cron: true,
  everyMs: true,
  timezone: true,
  topic: true,
  payload: true,
  headers: true,
  key: true,
  catchUp: true,
});

const CATCH_UP_KEYS = ['maxTicks', 'withinMs'];

/** `c` checked; an object keeps only the bounds it was given. Throws `InvalidArgumentError`. */
function checkCatchUp(c: unknown): CatchUp {
  if (c === undefined) return DEFAULT_CATCH_UP;
  if (c === 'none' || c === 'latest') return c;
  if (typeof c !== 'object' || c === null || Array.isArray(c)) {
    throw new InvalidArgumentError(`catchUp must be "none", "latest" or { maxTicks?, withinMs? }, got ${shown(c)}`);
  }
  rejectUnknownKeys('catchUp option', c, CATCH_UP_KEYS);
  const { maxTicks, withinMs } = c as { maxTicks?: unknown; withinMs?: unknown };
  const out: { maxTicks?: number; withinMs?: number } = {};
  if (maxTicks !== undefined) {
    if (typeof maxTicks !== 'number' || !Number.isInteger(maxTicks) || maxTicks < 1 || maxTicks > MAX_CATCH_UP_TICKS) {
      throw new InvalidArgumentError(`catchUp.maxTicks must be an integer from 1 to ${MAX_CATCH_UP_TICKS}, got ${shown(maxTicks)}`);
    }
    out.maxTicks = maxTicks;
  }
  if (withinMs !== undefined) {
    if (typeof withinMs !== 'number' || !Number.isSafeInteger(withinMs) || withinMs < 0) {
      throw new InvalidArgumentError(`catchUp.withinMs must be an integer ≥ 0, got ${shown(withinMs)}`);
    }
    out.withinMs = withinMs;
  }
  return out;
}

/**
 * The timing part of a spec from `opts`: exactly one of `cron` (with its
 * time zone, `UTC` by default) and `everyMs`, and the catch-up rule. Throws
 * `InvalidArgumentError` for an unknown key, both or neither of `cron` and
 * `everyMs`, an expression that does not parse or never matches after
 * `now`, an unknown time zone, a `timezone` with `everyMs`, or a bad
 * `everyMs` or `catchUp`.
 */
export function scheduleTiming(opts: ScheduleOptions<unknown>, now: number): Omit<ScheduleSpec, 'topic' | 'key' | 'headers'> {
  if (typeof opts !== 'object' || opts === null || Array.isArray(opts)) throw new InvalidArgumentError('schedule options must be an object');
  rejectUnknownKeys('schedule option', opts, SCHEDULE_OPTION_KEYS);
  const catchUp = checkCatchUp(opts.catchUp);
  if ((opts.cron === undefined) === (opts.everyMs === undefined)) throw new InvalidArgumentError('a schedule needs exactly one of cron and everyMs');
  if (opts.everyMs !== undefined) {
    const every = opts.everyMs;
    if (typeof every !== 'number' || !Number.isInteger(every) || every < MIN_EVERY_MS || every > MAX_DATE_MS) {
      throw new InvalidArgumentError(`everyMs must be an integer from ${MIN_EVERY_MS} to ${MAX_DATE_MS} (the latest time a Date holds), got ${shown(every)}`);
    }
    if (opts.timezone !== undefined) throw new InvalidArgumentError('timezone applies to cron only; everyMs ticks at multiples of its period since the Unix epoch');
    // A tick past what a Date can hold could not be listed, fired or shown (listSchedules gave an Invalid Date).
    if (Math.floor(now / every) * every + every > MAX_DATE_MS) {
      throw new InvalidArgumentError(`everyMs ${every} puts the next tick past the latest time a Date can hold (${MAX_DATE_MS} ms after the Unix epoch)`);
    }
    return { everyMs: every, catchUp };
  }
  const timezone = opts.timezone === undefined ? 'UTC' : canonicalTimeZone(opts.timezone);
  return { cron: checkCron(opts.cron, timezone, now), timezone, catchUp };
}

/** JSON of `v` with object keys sorted, so equal specs print alike whatever order their fields were given in. */
function canonical(v: unknown): string {
  if (typeof v !== 'object' || v === null) return JSON.stringify(v);
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o)
    .filter((k) => o[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
    .join(',')}}`;
}

/** The revision of (`spec`, `payload`): 32 hex digits of a SHA-256 over both. */
export function scheduleRevision(spec: ScheduleSpec, payload: Uint8Array): string {
  return createHash('sha256').update(canonical(spec)).update('\n').update(payload).digest('hex').slice(0, 32);
}

/** What `listSchedules` reports of `r`: its options, progress and next tick. */
export function scheduleInfo(r: ScheduleRecord): ScheduleInfo {
  const s = r.spec;
  const timing = s.cron !== undefined ? { cron: s.cron, timezone: s.timezone ?? 'UTC' } : { everyMs: s.everyMs! };
  const out = { name: r.name, ...timing, topic: s.topic } as ScheduleInfo;
  if (s.key !== undefined) out.key = s.key;
  if (s.headers !== undefined) out.headers = s.headers;
  Object.assign(out, { payload: r.payload, catchUp: s.catchUp, updatedAt: r.updatedAt });
  if (r.lastTick !== undefined) out.lastTickAt = r.lastTick;
  const next = ticksOf(s).next((r.lastTick ?? r.updatedAt).getTime());
  if (next !== undefined) out.nextTickAt = new Date(next);
  return out;
}
