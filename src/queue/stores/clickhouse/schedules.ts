/**
 * The ClickHouse store's schedules (the four optional schedule methods of
 * the Store SPI), kept in the `schedules` table (migrations/003_schedules.sql)
 * as versions like every other row. A write reads the name's latest version
 * and writes the next one under the schedule's lock
 * (`ferry/<database>/schedule/<name>`), so a put's "unless this revision is
 * there", a delete's "whether it existed" and an advance's compare-and-set on
 * the revision and the tick are decided with no other write of that name in
 * between. Each write is one row holding every column, and readers take a
 * version's columns together (`argMax` of a tuple), so a schedule is always
 * read whole. Listing takes no lock.
 *
 * Without a shared locker (a store that only publishes) the lock is the
 * process's own, as for publishes: two such processes writing one schedule
 * at once are not serialised, and an advance of one may then be lost (its
 * tick is published again by the next round, which stores nothing new).
 */
import type { ScheduleRecord, ScheduleSpec } from '../../schedules/types.js';
import type { Connection } from './connection.js';
import { scheduleKey } from './connection.js';
import { decodeWtf8, fromHex } from './escape.js';

/** A row of schedule-state.sql. */
interface StateRow {
  l_revision: string;
  l_ticked: number;
  l_last_tick: string;
  l_deleted: number;
  l_ver: string;
}

/** A row of list-schedules.sql. */
interface ListRow {
  name: string;
  l_revision: string;
  l_spec_hex: string;
  l_payload_hex: string;
  l_updated_at: string;
  l_ticked: number;
  l_last_tick: string;
}

/** Schedule reads and writes on one store handle's connection. */
export class Schedules {
  readonly #conn: Connection;

  constructor(conn: Connection) {
    this.#conn = conn;
  }

  /** See `Store.putSchedule`. */
  put(r: ScheduleRecord): Promise<boolean> {
    return this.#write(r.name, async (state, ver) => {
      if (state && Number(state.l_deleted) === 0 && state.l_revision === r.revision) return false;
      await this.#conn.insert('insert-schedules', [[r.name, r.revision, JSON.stringify(r.spec), r.payload, r.updatedAt.getTime(), 0, 0, 0, ver]]);
      return true;
    });
  }

  /** See `Store.deleteSchedule`. */
  delete(name: string): Promise<boolean> {
    return this.#write(name, async (state, ver) => {
      if (!state || Number(state.l_deleted) !== 0) return false;
      await this.#conn.insert('insert-schedules', [[name, '', '', '', 0, 0, 0, 1, ver]]);
      return true;
    });
  }

  /** See `Store.listSchedules`. */
  async list(): Promise<ScheduleRecord[]> {
    this.#conn.assertOpen();
    return (await this.#conn.rows<ListRow>('list-schedules')).map((row) => {
      const r: ScheduleRecord = {
        name: row.name,
        revision: row.l_revision,
        spec: JSON.parse(decodeWtf8(fromHex(row.l_spec_hex))) as ScheduleSpec,
        payload: fromHex(row.l_payload_hex),
        updatedAt: new Date(Number(row.l_updated_at)),
      };
      if (Number(row.l_ticked) === 1) r.lastTick = new Date(Number(row.l_last_tick));
      return r;
    });
  }

  /** See `Store.advanceSchedule`. */
  advance(name: string, revision: string, tick: Date): Promise<boolean> {
    return this.#write(name, async (state, ver) => {
      if (!state || Number(state.l_deleted) !== 0 || state.l_revision !== revision) return false;
      if (Number(state.l_ticked) === 1 && Number(state.l_last_tick) >= tick.getTime()) return true;
      await this.#conn.exec('advance-schedule', { name, tick: tick.getTime(), ver });
      return true;
    });
  }

  /**
   * Runs `fn` under schedule `name`'s lock with its latest version (undefined
   * when never stored) and the version a write must take: above the latest,
   * and above every version written earlier on the server's clock. `fn`
   * only decides and writes, so the lock is checked once, before it.
   */
  #write(name: string, fn: (state: StateRow | undefined, ver: number) => Promise<boolean>): Promise<boolean> {
    const conn = this.#conn;
    return conn.locked([scheduleKey(conn.db, name)], async (now, held) => {
      const [state] = await conn.rows<StateRow>('schedule-state', { name });
      held();
      return fn(state, Math.max(now * 1000, Number(state?.l_ver ?? 0) + 1));
    });
  }
}
