/**
 * Schedules to and from rows of the SQLite store's `ferry_schedules` table
 * (migrations/005_schedules.sql): the spec as JSON text, the payload as a
 * blob, instants as integer milliseconds.
 */
import type { ScheduleRecord, ScheduleSpec } from '../../schedules/types.js';

/** A row of list-schedules.sql. */
export interface ScheduleRow {
  name: string;
  revision: string;
  spec: string;
  payload: Buffer;
  updated_at: number;
  last_tick: number | null;
}

/** The bind values of put-schedule.sql for `r`. */
export function scheduleValues(r: ScheduleRecord): { name: string; revision: string; spec: string; payload: Buffer; updatedAt: number } {
  return {
    name: r.name,
    revision: r.revision,
    spec: JSON.stringify(r.spec),
    payload: Buffer.from(r.payload.buffer, r.payload.byteOffset, r.payload.byteLength),
    updatedAt: r.updatedAt.getTime(),
  };
}

/** The schedule a row holds. */
export function scheduleFromRow(row: ScheduleRow): ScheduleRecord {
  const r: ScheduleRecord = {
    name: row.name,
    revision: row.revision,
    spec: JSON.parse(row.spec) as ScheduleSpec,
    payload: new Uint8Array(row.payload.buffer, row.payload.byteOffset, row.payload.byteLength),
    updatedAt: new Date(row.updated_at),
  };
  if (row.last_tick !== null) r.lastTick = new Date(row.last_tick);
  return r;
}
