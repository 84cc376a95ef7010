/**
 * `ferry stats DIR`: opens the queue (taking its lock, like any open) and
 * prints its stats, as an aligned table or as one JSON line.
 *
 * Opening applies the same repairs as any open would, and the counters that
 * run "since open" (added, delivered, committed) are therefore 0 here; the
 * gauges and loss counters are what this command is for.
 */
import type { DiskQueueStats } from '../diskqueue/index.js';
import { formatBytes, openQueue } from './common.js';

/** Options of `ferry stats`. */
export interface StatsOptions {
  json?: boolean;
  lockTimeout?: number;
}

/** Stat fields printed as byte sizes in the table. */
const BYTE_FIELDS = new Set(['backlogBytes', 'maxBytes', 'inFlightBytes', 'unsyncedBytes', 'diskBytes', 'lostBytes', 'foreignBytes', 'discardedBytes']);

/** Runs `ferry stats`; resolves to the exit status. */
export async function stats(dir: string, o: StatsOptions): Promise<number> {
  const q = await openQueue(dir, { create: false, lockTimeoutMs: o.lockTimeout });
  let s: DiskQueueStats;
  try {
    s = q.stats();
  } finally {
    await q.close();
  }
  if (o.json) {
    process.stdout.write(`${JSON.stringify(s)}\n`);
    return 0;
  }
  const rows = Object.entries(s);
  const width = Math.max(...rows.map(([k]) => k.length));
  const lines = rows.map(([k, v]) => {
    const shown = BYTE_FIELDS.has(k) && v > 0 ? `${v} (${formatBytes(v)})` : String(v);
    return `${k.padEnd(width)}  ${shown}`;
  });
  process.stdout.write(`${lines.join('\n')}\n`);
  return 0;
}
