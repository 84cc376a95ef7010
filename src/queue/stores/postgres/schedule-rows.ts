/**
 * Schedules to and from rows of the Postgres store's `schedules` table
 * (migrations/005_schedules.sql): the spec as JSON text, the payload as
 * bytea, instants as timestamptz (exact to the millisecond the engine uses).
 */
import type { ScheduleRecord, ScheduleSpec } from '../../schedules/types.js';

/** A row of list-schedules.sql. */
export interface ScheduleRow {
  name: string;
  revision: string;
  spec: string;
  payload: Buffer;
  updated_at: Date;
  last_tick: Date | null;
}

/** The bind values of put-schedule.sql for `r`. */
export function scheduleValues(r: ScheduleRecord): unknown[] {
  return [r.name, r.revision, JSON.stringify(r.spec), Buffer.from(r.payload.buffer, r.payload.byteOffset, r.payload.byteLength), r.updatedAt];
}

/** The schedule a row holds. */
export function scheduleFromRow(row: ScheduleRow): ScheduleRecord {
  const r: ScheduleRecord = {
    name: row.name,
    revision: row.revision,
    spec: JSON.parse(row.spec) as ScheduleSpec,
    payload: new Uint8Array(row.payload.buffer, row.payload.byteOffset, row.payload.byteLength),
    updatedAt: row.updated_at,
  };
  if (row.last_tick !== null) r.lastTick = row.last_tick;
  return r;
}
