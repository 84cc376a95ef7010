/**
 * `ferry stats DIR`: opens the queue (taking its lock, like any open) and
 * prints its stats, as an aligned table or as one JSON line.
 *
 * Opening applies the same repairs as any open would, and the counters that
 * run "since open" (added, delivered, committed) are therefore 0 here; the
 * gauges and loss counters are what this command is for. Loss the open found
 * is told on stderr and the exit status is 1: the open may have repaired
 * it away, and then no later command would hear of it.
 */
import type { DiskQueueStats } from '../diskqueue/index.js';
import { EXIT_FAILED, formatBytes, noteOpenLoss, openQueue, requireDirectory } from './common.js';
import { isSpoolDir, noteCursorError, noteOpenLosses, openSpool } from './spool-dir.js';

/** Options of `ferry stats`. */
export interface StatsOptions {
  json?: boolean;
  lockTimeout?: number;
}

/** Stat fields printed as byte sizes in the table. */
const BYTE_FIELDS = new Set(['backlogBytes', 'maxBytes', 'inFlightBytes', 'unsyncedBytes', 'diskBytes', 'lostBytes', 'foreignBytes', 'discardedBytes']);

/** Runs `ferry stats`; resolves to the exit status. */
export async function stats(dir: string, o: StatsOptions): Promise<number> {
  await requireDirectory(dir);
  let s: object;
  // Damage this open found is told here (and exits 1): a repair at open may cut it away, and then no later command hears of it.
  let lost: number;
  if (await isSpoolDir(dir)) {
    const sp = await openSpool(dir, o.lockTimeout);
    try {
      lost = noteOpenLosses(dir, sp, false);
      // Told (and exit 1) as drain and forward tell it: every run of theirs would deliver the same records again.
      if (noteCursorError(dir, sp)) lost++;
      s = { format: 'spool', ...sp.stats() };
    } finally {
      await sp.close();
    }
  } else {
    const q = await openQueue(dir, { create: false, lockTimeoutMs: o.lockTimeout });
    try {
      lost = noteOpenLoss(dir, q);
      s = q.stats() satisfies DiskQueueStats;
    } finally {
      await q.close();
    }
  }
  const status = lost > 0 ? EXIT_FAILED : 0;
  if (o.json) {
    process.stdout.write(`${JSON.stringify(s)}\n`);
    return status;
  }
  const rows = Object.entries(s);
  const width = Math.max(...rows.map(([k]) => k.length));
  const lines = rows.map(([k, v]) => {
    const shown = BYTE_FIELDS.has(k) && typeof v === 'number' && v > 0 ? `${v} (${formatBytes(v)})` : String(v);
    return `${k.padEnd(width)}  ${shown}`;
  });
  process.stdout.write(`${lines.join('\n')}\n`);
  return status;
}
