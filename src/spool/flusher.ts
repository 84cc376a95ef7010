/**
 * What makes a spool's writes durable: counting frames written against the
 * ones a completed flush covers, the flush itself (behind group commit), and
 * the rollback when it fails. The spool's counterpart of the DiskQueue's
 * `diskqueue/flusher.ts`, talking to the spool through {@link FlusherHost}.
 *
 * One flush: fdatasync each segment with unsynced bytes, then the directory
 * when names changed. Frames written while a flush runs wait for the next.
 *
 * A failed fdatasync does not latch, as the DiskQueue's does: it rolls every
 * segment back to its last durable size and reopens the descriptor (a
 * retried fsync on the same one could claim durability it does not have),
 * so a later flush can succeed. The appends waiting on it reject, and an
 * `appendNoSync` group caught in it makes the next `sync()` reject with
 * `GroupLostError`.
 */
import { FerryError, GroupLostError, IOError } from '../errors.js';
import { asIOError } from '../errors.js';
import type { FileSystem } from '../storage/fs.js';
import { GroupCommit } from '../storage/group-commit.js';
import { repairTail } from './recovery.js';
import type { SpoolSegment } from './segment.js';

/** What the flusher needs of its spool. */
export interface FlusherHost {
  readonly dir: string;
  /** The segments, oldest first; a rollback removes the ones created since the last flush. */
  readonly segments: SpoolSegment[];
  /** Writes the frames `appendNoSync` staged, so a flush covers them. */
  writeStaged(): void;
  /** Drops the staged frames unwritten: they lie past a rollback's cut. */
  dropStaged(): void;
  /** Closes a segment's descriptor unless the spool still uses it often. */
  release(seg: SpoolSegment): void;
  /**
   * A rollback cut the segments back (and `discarded` bytes more off torn
   * tails): the head must not point past its segment's end, and an append
   * needs a tail.
   */
  rolledBack(discarded: number): void;
}

/** `" (ENOSPC)"` for a system error's code, or nothing. */
function causeText(cause: unknown): string {
  const code = (cause as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' ? ` (${code})` : '';
}

function groupLostError(cause: unknown): GroupLostError {
  return new GroupLostError(`appendNoSync records were rolled back by a failed write or fdatasync${causeText(cause)}; re-append the group`, { cause });
}

/** A flush failure, remembering whether it cost an `appendNoSync` group. */
class FlushFailure extends IOError {
  constructor(
    err: unknown,
    readonly groupLost: boolean,
  ) {
    super(`spool fdatasync failed; unsynced records were rolled back: ${(err as Error)?.message ?? err}`, {
      cause: err instanceof FerryError ? err.cause : err,
    });
    // Callers see an IOError; this subclass only carries `groupLost` inside.
    this.name = 'IOError';
  }
}

export class Flusher {
  /** A segment file was created or removed since the last directory sync. */
  dirDirty = false;
  /** Frames written, and the count the last completed flush covered. */
  private written = 0;
  private durableWritten = 0;
  /** `written` at the last appendNoSync frame. */
  private lastNoSync = 0;
  /** A rollback (or a failed staged write) cost an appendNoSync group that no sync has reported yet. */
  private groupLost = false;
  /** The failure that cost that group (a write's or an fdatasync's system error), for the report. */
  private groupLostCause: unknown;
  /** Requeues whose copy waits for a flush to cover frame number `mark`. */
  private copies: Array<{ mark: number; done(): void; failed(err: unknown): void }> = [];
  private readonly group = new GroupCommit(() => this.flush());

  constructor(
    private readonly fs: FileSystem,
    private readonly host: FlusherHost,
  ) {}

  /** Counts one frame written (by `appendNoSync` when `noSync`). */
  wrote(noSync: boolean, records = 1): void {
    this.written += records;
    if (noSync) this.lastNoSync = this.written;
  }

  /** Staged `appendNoSync` frames never reached the kernel (`err` says why): the next `sync()` reports the group lost. */
  lostStaged(err: unknown): void {
    this.groupLost = true;
    this.groupLostCause ??= err;
  }

  /** Whether an `appendNoSync` group was lost (a staged write or an fdatasync failed) and no `sync()` has reported it yet. */
  get lostGroup(): boolean {
    return this.groupLost;
  }

  /**
   * The error for a record refused while the lost group is unreported (see
   * {@link lostGroup}). It does not report the loss: `sync()` still does, so
   * a caller that counts records as stored when `sync()` resolves never
   * counts the lost ones.
   */
  refusedAfterLoss(): GroupLostError {
    return new GroupLostError(
      `an appendNoSync group was lost${causeText(this.groupLostCause)} and sync() has not reported it yet: nothing was placed; call sync() (it rejects with the loss), then re-append the group`,
      { cause: this.groupLostCause },
    );
  }

  /** Bytes written and not yet covered by a completed fdatasync. */
  unsyncedBytes(): number {
    let n = 0;
    for (const s of this.host.segments) n += Math.max(0, s.size - s.durable);
    return n;
  }

  /** Whether a `sync()` now has something to do or to report. */
  get owed(): boolean {
    return this.groupLost || this.unsyncedBytes() > 0;
  }

  /**
   * Waits for a flush covering everything written so far. With `forSync`
   * (for `sync()` and close), a lost `appendNoSync` group rejects as
   * `GroupLostError`; otherwise a failed flush rejects as an `IOError`.
   */
  async durable(forSync: boolean): Promise<void> {
    if (forSync && this.groupLost) throw this.reportGroupLost(undefined);
    if (this.written === this.durableWritten && !this.dirDirty && this.unsyncedBytes() === 0) return;
    try {
      await this.group.request();
    } catch (err) {
      if (forSync && (this.groupLost || (err instanceof FlushFailure && err.groupLost))) throw this.reportGroupLost((err as FerryError).cause);
      throw err;
    }
  }

  /**
   * Calls `done` inside the flush that makes every frame written so far
   * durable (before anything else runs), or `failed` when a flush fails
   * first: the rollback then cut the frames. Does not start a flush.
   */
  whenCovered(done: () => void, failed: (err: unknown) => void): void {
    this.copies.push({ mark: this.written, done, failed });
  }

  /**
   * fdatasyncs every segment and the directory once and counts it all
   * durable: for bytes and names a previous process left in the page cache.
   * Only the tail keeps its descriptor, as in recovery.ts.
   *
   * @throws IOError an fdatasync failed; nothing was changed or deleted.
   */
  async syncInherited(): Promise<void> {
    const segs = this.host.segments;
    try {
      for (const s of segs) {
        await s.datasync();
        if (s !== segs[segs.length - 1]) s.close();
      }
      await this.fs.syncDir(this.host.dir);
    } catch (err) {
      throw asIOError(`cannot sync the spool in ${this.host.dir}`, err);
    }
    for (const s of segs) s.durable = s.size;
  }

  /** Resolves when no flush is running. */
  settled(): Promise<void> {
    return this.group.settled();
  }

  /** Clears the lost group it reports; `fallback` is the cause when none was recorded. */
  private reportGroupLost(fallback: unknown): GroupLostError {
    this.groupLost = false;
    const cause = this.groupLostCause ?? fallback;
    this.groupLostCause = undefined;
    return groupLostError(cause);
  }

  private async flush(): Promise<void> {
    this.host.writeStaged();
    const covered = this.written;
    const snap = this.host.segments.filter((s) => s.size > s.durable).map((s) => ({ s, size: s.size }));
    const dir = this.dirDirty;
    this.dirDirty = false;
    try {
      // A commit may retire a listed segment while an earlier one syncs (or
      // during its own fdatasync): its records are all committed, so it
      // needs no sync, and its failure costs nothing still queued.
      for (const { s } of snap) {
        if (s.retired) continue;
        try {
          await s.datasync();
        } catch (err) {
          if (!s.retired) throw err;
        }
        this.host.release(s);
      }
      if (dir) await this.fs.syncDir(this.host.dir);
    } catch (err) {
      if (dir) this.dirDirty = true;
      const lost = this.rollback();
      if (lost) this.groupLostCause ??= err instanceof FerryError ? err.cause : err;
      const failure = new FlushFailure(err, lost);
      this.group.failWaiting(failure);
      // The rollback cut every unsynced frame, requeue copies included.
      for (const c of this.copies.splice(0)) c.failed(failure);
      throw failure;
    }
    for (const { s, size } of snap) s.durable = Math.max(s.durable, size);
    this.durableWritten = Math.max(this.durableWritten, covered);
    while (this.copies.length > 0 && this.copies[0]!.mark <= this.durableWritten) this.copies.shift()!.done();
  }

  /**
   * Cuts every segment back to its last durable size, on a fresh descriptor,
   * and lets the host clamp the head. Returns whether an appendNoSync group
   * was caught.
   */
  private rollback(): boolean {
    // Staged frames lie past the cut and go with it.
    this.host.dropStaged();
    const segs = this.host.segments;
    let discarded = 0;
    for (let i = segs.length - 1; i >= 0; i--) {
      const s = segs[i]!;
      if (s.size <= s.durable && s.durable > 0) continue;
      s.reopen();
      if (s.durable === 0) {
        // Created since the last flush: its name was never durable either.
        s.retired = true;
        s.close();
        try {
          this.fs.unlink(s.path);
        } catch {
          // an unsynced name may vanish by itself; if not, the header-only file holds no records
        }
        segs.splice(i, 1);
        this.dirDirty = true;
        continue;
      }
      try {
        s.truncate(s.durable);
        s.size = s.durable;
        discarded += repairTail(s);
      } catch {
        s.size = s.durable;
        s.sealed = true;
      }
      // Only what lies past the cut is gone: a record handed out before it
      // that ends below it is still the same record at the same place.
      s.cutTo(s.size);
    }
    this.host.rolledBack(discarded);
    const lost = this.lastNoSync > this.durableWritten;
    this.written = this.durableWritten;
    this.lastNoSync = Math.min(this.lastNoSync, this.durableWritten);
    if (lost) this.groupLost = true;
    return lost;
  }
}
