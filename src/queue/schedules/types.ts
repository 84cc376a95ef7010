/**
 * The shapes of schedules (`Queue.schedule`, `listSchedules`) and of the
 * records the Store SPI keeps for them. Kept apart from ../types.ts, which
 * imports them, so the schedule contract reads in one place.
 */

/**
 * What a schedule does with the ticks no instance fired because none was
 * running (or none could reach the store) when they came due; see
 * `ScheduleOptions.catchUp`. `'none'`: nothing, the schedule goes on from
 * the next tick. `'latest'`: the newest missed tick, once. An object: the
 * missed ticks at most `withinMs` old (no age bound when omitted), the
 * newest `maxTicks` of them (an integer 1–10000, default 10000), published
 * oldest first, as graphile-worker's crontab backfill.
 */
export type CatchUp = 'none' | 'latest' | { maxTicks?: number; withinMs?: number };

/**
 * Options of `Queue.schedule`. Exactly one of `cron` and `everyMs`.
 * `T` is the payload type of the queue's codec.
 */
export interface ScheduleOptions<T = Uint8Array> {
  /**
   * A cron expression: five fields (minute hour day-of-month month
   * day-of-week), or six with seconds first, or seven with a year last;
   * names (`MON`, `JAN`), ranges, steps, lists, `L`, `W`, `#` and the
   * nicknames `@yearly`, `@monthly`, `@weekly`, `@daily`, `@hourly` work as
   * in the croner package, which parses it. Evaluated in `timezone`.
   */
  cron?: string;
  /** A tick every this many milliseconds (an integer ≥ 1000), at the multiples of it since the Unix epoch (so 60000 ticks at every whole minute, UTC). */
  everyMs?: number;
  /**
   * IANA time zone of `cron` (e.g. `Europe/Berlin`). Default `UTC`. Across a
   * daylight-saving change: a wall time that does not exist that day
   * (spring forward) fires once at the first valid instant after the gap;
   * a wall time that occurs twice (fall back) fires once, at its first
   * occurrence; an expression with a wildcard or step in its second, minute
   * or hour field fires at every instant it matches, so it skips the gap
   * and fires in both passes of a repeated hour. Not allowed with `everyMs`.
   */
  timezone?: string;
  /** Topic each tick's message is published to. */
  topic: string;
  /** Payload of every tick's message, encoded once by the queue's codec when the schedule is stored. Default: empty bytes. */
  payload?: T;
  /** Headers of every tick's message; `x-queue-schedule` and `x-queue-schedule-tick` are set by the scheduler and override these. */
  headers?: Record<string, string>;
  /** Ordering key of every tick's message (see `Message.key`): ticks then run strictly in order. */
  key?: string;
  /** What to do with ticks missed while no instance ran. Default `'latest'`. */
  catchUp?: CatchUp;
}

/** A stored schedule, as `Queue.listSchedules` reports it. */
export interface ScheduleInfo {
  name: string;
  cron?: string;
  everyMs?: number;
  /** The time zone of `cron` (`UTC` when none was given); absent with `everyMs`. */
  timezone?: string;
  topic: string;
  /** The stored payload bytes (no codec applied). */
  payload: Uint8Array;
  headers?: Record<string, string>;
  key?: string;
  catchUp: CatchUp;
  /** When the schedule was stored with these options (the instance's clock). */
  updatedAt: Date;
  /** The newest tick published so far; absent before the first. */
  lastTickAt?: Date;
  /** The first tick after `lastTickAt` (or after `updatedAt`); absent when the expression never matches again. */
  nextTickAt?: Date;
}

/**
 * The stored definition of a schedule: what `Queue.schedule` was given,
 * checked and normalised, without the payload. Stores keep it as they
 * like (a JSON column) and give it back unchanged.
 */
export interface ScheduleSpec {
  cron?: string;
  everyMs?: number;
  /** Always set with `cron` (default `UTC`). */
  timezone?: string;
  topic: string;
  key?: string;
  headers?: Record<string, string>;
  catchUp: CatchUp;
}

/**
 * A schedule as the Store SPI keeps it. Its instants are the engine's (the
 * clock of the instance that wrote them), kept verbatim: a store compares
 * `lastTick`s with each other only.
 */
export interface ScheduleRecord {
  /** 1–200 characters of `[A-Za-z0-9._-]`. */
  name: string;
  /** A fingerprint of `spec` and `payload`: equal options give equal revisions. */
  revision: string;
  spec: ScheduleSpec;
  /** The payload of every tick's message, as stored bytes. */
  payload: Uint8Array;
  /** When this revision was stored; ticks at or before it are never fired. */
  updatedAt: Date;
  /** The newest tick published (`advanceSchedule`); absent before the first. */
  lastTick?: Date;
}
