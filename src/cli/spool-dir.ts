/**
 * The CLI's view of a spool directory: telling one from a diskqueue
 * directory by its files, and opening one the way a command line means it.
 */
import { readdir } from 'node:fs/promises';
import { Spool, LockedError, FerryError, GroupLostError, UNBOUNDED } from '../spool/index.js';
import { filesOf, mixedFormats } from '../storage/format-guard.js';
import { CliError, EXIT_FAILED, EXIT_USAGE, describe, formatBytes, note, sleep } from './common.js';

/**
 * Whether `dir` holds a spool (its segment files or cursor); false for a
 * missing or empty directory, or a DiskQueue's.
 *
 * @throws CliError (exit 2) the directory holds both formats' files: which one to read is a guess, and a wrong one hides records.
 */
export async function isSpoolDir(dir: string): Promise<boolean> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return false;
  }
  const mixed = mixedFormats(dir, names);
  if (mixed !== undefined) throw new CliError(mixed, EXIT_USAGE);
  return filesOf('spool', names).length > 0;
}


/**
 * Opens the spool in `dir`, waiting up to `lockTimeoutMs` for another
 * process to let go of it. `limits` are the command line's `--max-bytes`
 * (0 meaning no cap, as for a diskqueue; absent, the spool's default) and
 * segment size (it applies to segments created from now on).
 *
 * @throws CliError (exit 2) locked or unreadable.
 */
export async function openSpool(dir: string, lockTimeoutMs = 0, signal?: AbortSignal, limits: { maxBytes?: number; segmentBytes?: number } = {}): Promise<Spool> {
  const deadline = Date.now() + lockTimeoutMs;
  const maxBytes = limits.maxBytes === undefined ? 0 : limits.maxBytes === 0 ? UNBOUNDED : limits.maxBytes;
  for (;;) {
    try {
      return await Spool.open(dir, { maxBytes, segmentBytes: limits.segmentBytes });
    } catch (err) {
      if (err instanceof LockedError && Date.now() < deadline && !signal?.aborted) {
        await sleep(50, signal);
        continue;
      }
      if (err instanceof LockedError) throw new CliError(`${dir} is locked: another process has this spool open`, EXIT_USAGE);
      throw new CliError(`cannot open spool ${dir}: ${describe(err)}`, EXIT_USAGE);
    }
  }
}

/** What a batch that stopped part-way says of its records (`placed` is `FerryError`'s own). */
export interface PartialBatch {
  /** Records after the `placed` ones that may be stored too: their sync failed, so the spool kept some or none of them. */
  unsure?: number;
}

/**
 * A spool dressed as the part of a DiskQueue that `ferry push` uses: a batch
 * is appended without syncing and made durable with one `sync`. When an
 * error (the cap, a full disk) stops it part-way, the records before are
 * synced and the error's `placed` says how many are durable.
 */
export function spoolSink(s: Spool): { addBatch(records: Uint8Array[]): Promise<number>; close(): Promise<void> } {
  return {
    async addBatch(records) {
      let placed = 0;
      let failure: unknown;
      // Whether the spool may have cut records this batch placed.
      let cut = false;
      try {
        for (const r of records) {
          await s.appendNoSync(r);
          placed++;
        }
      } catch (err) {
        // A lost group (a staged write failed) cut some of the placed records already.
        failure = err;
        cut = err instanceof GroupLostError;
      }
      // The records placed before any failure are made durable and counted,
      // whatever stopped the batch (the cap, or a write the disk refused).
      try {
        await s.sync();
      } catch (err) {
        // The batch's last write or its fdatasync failed: the spool kept a
        // prefix of what was placed, or none of it. The first failure is the one reported.
        failure ??= err;
        cut = true;
      }
      if (failure === undefined) return placed;
      // When the spool may have cut some, none counts as stored and `unsure` says how many may be.
      if (failure instanceof FerryError) {
        failure.placed = cut ? 0 : placed;
        if (cut && placed > 0) (failure as PartialBatch).unsure = placed;
      }
      throw failure;
    },
    close: () => s.close(),
  };
}

/**
 * Tells on stderr what opening `spool` cut or dropped, and returns how many
 * damaged spans of it count as loss. A torn tail cut is what a crash leaves
 * of unsynced writes (never a record a command accepted, unless the file was
 * damaged): told, not counted. Segments of a format version this build
 * cannot read, dropped whole, are counted. Segments whose header was damaged
 * were dropped too: the spool tells of each at the next `pop`, so a command
 * that pops (`popping`) leaves them to that; one that does not (push, stats)
 * tells and counts them here, or no one would ever hear of them. Damage
 * inside the frames is told as the head reaches it.
 */
export function noteOpenLosses(dir: string, spool: Spool, popping: boolean): number {
  const st = spool.stats();
  if (st.discardedBytes > 0) note(`ferry: opening ${dir} cut ${st.discardedBytes} bytes of a torn tail (the last writes before a crash, or damage there)`);
  let lost = 0;
  if (!popping && st.lostSegments > 0) {
    note(`ferry: skipped damaged data: opening ${dir} dropped ${st.lostSegments} segment(s) with a damaged header (${formatBytes(st.lostBytes)}): their records are lost`);
    lost += st.lostSegments;
  }
  if (st.foreignSegments > 0) {
    note(`ferry: skipped damaged data: opening ${dir} dropped ${st.foreignSegments} segment(s) of an unknown format version (${st.foreignBytes} bytes)`);
    lost += st.foreignSegments;
  }
  return lost;
}

/**
 * The error a command ends with when `dir`'s cursor could not be written
 * (`Spool.cursorError`): its commits advanced only in memory, so the records
 * delivered since the last good write come again in the next run. Exit 1.
 */
export function cursorWriteFailed(dir: string, cause: unknown): CliError {
  return new CliError(`cannot write ${dir}'s cursor (${describe(cause)}): the records delivered since it last succeeded will be delivered again by the next run`, EXIT_FAILED);
}

/**
 * The error drain and forward refuse to start with when `dir`'s cursor
 * could not be written at open (`Spool.cursorError`): every run would
 * deliver the same records again. Nothing (more) is delivered; exit 2.
 */
export function cursorUnwritable(dir: string, cause: unknown, delivered = 0): CliError {
  const done = delivered === 0 ? 'nothing was delivered' : `nothing more was delivered (${delivered} records before it, committed)`;
  return new CliError(`cannot write ${dir}'s cursor (${describe(cause)}): ${done}, as every run would deliver the same records again; the records stay queued`, EXIT_USAGE);
}

/**
 * Tells on stderr that `spool`'s cursor could not be written at open (it is
 * a directory, a FIFO, a link to nothing, read-only…): a drain or forward of
 * it would deliver the same records at every run. Returns whether it did.
 */
export function noteCursorError(dir: string, spool: Spool): boolean {
  if (spool.cursorError === undefined) return false;
  note(`ferry: cannot write ${dir}'s cursor (${describe(spool.cursorError)}): a drain or forward of it would deliver the same records at every run`);
  return true;
}
