/**
 * `ferry dashboard --dir DIR`: what the page shows for a DiskQueue or spool
 * directory. Each look first runs the read-only check (`verifyQueue` or
 * `verifySpool`: segments, intact records, damaged spans), then, when that
 * found no damage, opens the directory just long enough to read `stats()`
 * and closes it again, as `ferry stats` does. Opening applies the open-time
 * repairs, which cut damage away: done by the dashboard, the loss would be
 * shown for one look and then be gone, and the consumer that reads the
 * directory next would never hear of it. So a damaged directory is shown
 * from the check alone and left as it is for its reader. Both steps take the
 * directory's lock while they run, so a directory another process has open
 * is shown as locked rather than waited for.
 */
import { DiskQueue, LockedError, SegmentSizeMismatchError, verifyQueue, type VerifyReport } from '../diskqueue/index.js';
import { readdir } from 'node:fs/promises';
import { Spool, verifySpool, type SpoolVerifyReport } from '../spool/index.js';
import { looksLikeSpool } from '../spool/verify.js';
import { mixedFormats } from '../storage/format-guard.js';

/** One look at a directory. */
export interface DirView {
  dir: string;
  format: 'diskqueue' | 'spool';
  /** Milliseconds since the epoch. */
  at: number;
  /** Another process holds the directory: neither stats nor verify could run. */
  locked: boolean;
  /** `stats()` of the open queue or spool, or null when it could not be opened or was left closed (the check found damage). */
  stats: Record<string, number> | null;
  /** The read-only check's report, or null when it could not run. */
  verify: VerifyReport | SpoolVerifyReport | null;
  /** Why a part is missing, when one is. */
  error: string | null;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Looks at `dir` once. Never throws for a locked or damaged directory; the view says what went wrong. */
export async function lookAtDir(dir: string): Promise<DirView> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    // Gone or unreadable: nothing of an earlier look is shown beside the error.
    return { dir, format: 'diskqueue', at: Date.now(), locked: false, stats: null, verify: null, error: message(err) };
  }
  const spool = looksLikeSpool(names);
  const view: DirView = { dir, format: spool ? 'spool' : 'diskqueue', at: Date.now(), locked: false, stats: null, verify: null, error: null };
  // Both formats' files: either check alone would pass over the other's records. Shown as the error alone, as the CLI refuses it.
  const mixed = mixedFormats(dir, names);
  if (mixed !== undefined) return { ...view, error: mixed };
  try {
    view.verify = spool ? verifySpool(dir) : await verifyQueue(dir);
  } catch (err) {
    if (err instanceof LockedError) {
      view.locked = true;
      view.error = 'another process has this directory open';
      return view;
    }
    view.error = message(err);
  }
  // Damage is left for the directory's reader to hear of (see above).
  if (view.verify === null || !view.verify.ok) return view;
  try {
    if (spool) {
      const s = await Spool.open(dir, { maxBytes: 0 }); // as `ferry stats`: the spool's default cap
      try {
        view.stats = { ...s.stats() };
      } finally {
        await s.close();
      }
    } else {
      let q: DiskQueue<Uint8Array>;
      try {
        q = await DiskQueue.open<Uint8Array>(dir, {});
      } catch (err) {
        if (!(err instanceof SegmentSizeMismatchError)) throw err;
        q = await DiskQueue.open<Uint8Array>(dir, { segmentSize: err.stored });
      }
      try {
        view.stats = { ...q.stats() };
      } finally {
        await q.close();
      }
    }
  } catch (err) {
    if (err instanceof LockedError) view.locked = true;
    view.error ??= err instanceof LockedError ? 'another process has this directory open' : message(err);
  }
  return view;
}
