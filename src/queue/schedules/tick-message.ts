/**
 * The message a schedule publishes at a tick. Its ID is a function of the
 * schedule's name and the tick alone, so every instance that fires the
 * tick publishes the same ID and the store keeps one message: firing a
 * tick twice, from two instances or after a crash, is harmless for as long
 * as the store retains that message (`ackedRetentionHours` after every
 * group finished with it).
 */
import { uuidV5 } from '../delivery-id.js';
import type { StoredMessage } from '../types.js';
import type { ScheduleRecord } from './types.js';

/** ferry's namespace for the IDs of schedule ticks (RFC 9562 §5.5). Fixed forever: changing it would fire every retained tick again. */
export const SCHEDULE_ID_NAMESPACE = '71a6dcb3-1aae-4e68-bbf2-2e2b9ea94651';

/** Header on every tick's message: the schedule's name. */
export const HEADER_SCHEDULE = 'x-queue-schedule';
/** Header on every tick's message: the tick, as an ISO 8601 instant in UTC with milliseconds (`2026-03-29T01:00:00.000Z`). */
export const HEADER_SCHEDULE_TICK = 'x-queue-schedule-tick';

/**
 * The ID of the message schedule `name` publishes at `tick`: a UUIDv5 in
 * `SCHEDULE_ID_NAMESPACE` of `name + "@" + tick.toISOString()` (schedule
 * names cannot hold `@`).
 */
export function scheduleTickId(name: string, tick: Date): string {
  return uuidV5(SCHEDULE_ID_NAMESPACE, `${name}@${tick.toISOString()}`);
}

/** The message `r` publishes at `tick` (ms), published at `now` (ms). */
export function tickMessage(r: ScheduleRecord, tick: number, now: number): StoredMessage {
  const at = new Date(tick);
  const headers = { ...r.spec.headers, [HEADER_SCHEDULE]: r.name, [HEADER_SCHEDULE_TICK]: at.toISOString() };
  const m: StoredMessage = { id: scheduleTickId(r.name, at), topic: r.spec.topic, payload: r.payload, headers, publishedAt: new Date(now) };
  if (r.spec.key !== undefined) m.key = r.spec.key;
  return m;
}
