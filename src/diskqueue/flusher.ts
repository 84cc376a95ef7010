/**
 * What makes a DiskQueue's writes durable: dirty tracking, the flush itself
 * (behind group commit), and the latch.
 *
 * One flush: fdatasync every segment written since its last sync (and the
 * directory, when names changed), then write the headers that publish the
 * records that sync covered and persist commit moves, then fdatasync those.
 * Records written while a flush runs wait for the next one.
 *
 * A failed fdatasync latches: Linux reports a write-back error once and may
 * drop the pages, so a retried fsync could claim durability that is not there.
 * After that every flush rejects with an `IOError` whose cause is the original
 * error. A failed header write does not latch: the flush rolls back and a
 * later one can succeed.
 */
import { asIOError, IOError } from '../errors.js';
import type { FileSystem } from '../storage/fs.js';
import { GroupCommit } from '../storage/group-commit.js';
import type { Segment } from './segment.js';

export interface FlusherHost {
  readonly dir: string;
  readonly segments: Segment[];
  /** Records were published (readers may wake). */
  published(): void;
  /** `count` written records were rolled back. */
  rolledBack(count: number): void;
  /** Most fdatasyncs in flight at once (each holds a descriptor); 0 = no bound. */
  readonly maxOpenFiles?: number;
  /** Resolves once the unlinks of reclaimed segments under way have completed (each sets `dirDirty`). */
  unlinked(): Promise<void>;
  /** Segments out of the queue whose unlink failed and whose last header is not yet written and fdatasynced. */
  leaving(): Segment[];
}

/**
 * Runs `fn` over `items`, at most `limit` at a time (all at once when 0): an
 * fdatasync pins its descriptor, so a flush of many segments must not hold
 * more of them than `maxOpenFiles` allows.
 */
async function bounded<T>(items: T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  if (limit <= 0 || items.length <= limit) {
    await Promise.all(items.map(fn));
    return;
  }
  for (let i = 0; i < items.length; i += limit) await Promise.all(items.slice(i, i + limit).map(fn));
}

/**
 * Makes the last header of a segment out of the queue durable while its file
 * stays (its unlink failed): writes it if reclaim could not, then fdatasyncs
 * it, through a descriptor of its own. A file gone by now needs neither.
 */
async function syncLeftHeader(fs: FileSystem, seg: Segment): Promise<void> {
  let fh;
  try {
    fh = fs.open(seg.path, 'rw');
  } catch (err) {
    if ((err as NodeJS.ErrnoException)?.code === 'ENOENT') return;
    throw err;
  }
  try {
    if (seg.headerDirty) seg.writeHeaderTo(fh);
    await fh.datasync('header');
    seg.dataDirty = false;
  } finally {
    fh.close();
  }
}

export class Flusher {
  /** A segment file was created or removed since the last directory sync. */
  dirDirty = false;
  /** Bytes written since the last completed flush (batched policies). */
  unsyncedBytes = 0;
  /** Operations since the last completed flush (batched policies). */
  unsyncedOps = 0;
  private cause: unknown;
  private latchedFlag = false;
  private readonly group = new GroupCommit(() => this.flush());

  constructor(
    private readonly fs: FileSystem,
    private readonly host: FlusherHost,
  ) {}

  get latched(): boolean {
    return this.latchedFlag;
  }

  /** The error every write refuses with once latched. */
  latchedError(): IOError {
    const cause = this.cause;
    return new IOError(`queue is latched: making its writes durable failed: ${(cause as Error)?.message ?? cause}`, { cause });
  }

  /** Resolves once a flush that started after this call has completed. */
  request(): Promise<void> {
    return this.group.request();
  }

  /** Resolves when no flush is running. */
  settled(): Promise<void> {
    return this.group.settled();
  }

  /** Writes every header whose in-memory state moved; returns the segments written. */
  writeDirtyHeaders(): Segment[] {
    const written: Segment[] = [];
    for (const s of this.host.segments) {
      if (!s.headerDirty) continue;
      s.writeHeader(this.fs);
      written.push(s);
    }
    return written;
  }

  private async flush(): Promise<void> {
    if (this.latchedFlag) throw this.latchedError();
    // A commit that emptied a segment is durable once the segment's removal
    // is: the directory sync below must come after its unlink.
    await this.host.unlinked();
    if (this.latchedFlag) throw this.latchedError();
    const fs = this.fs;
    const leaving = this.host.leaving();
    const segments = this.host.segments;
    const pending = segments.filter((s) => s.end > s.writeCursor).map((s) => ({ s, end: s.end, count: s.endCount }));
    const dataDirty = segments.filter((s) => s.dataDirty);
    const dirDirty = this.dirDirty;
    const unsyncedBytes = this.unsyncedBytes;
    const unsyncedOps = this.unsyncedOps;
    for (const s of dataDirty) s.dataDirty = false;
    this.dirDirty = false;
    try {
      await bounded(dataDirty, this.host.maxOpenFiles ?? 0, (s) => s.datasync(fs, 'data'));
      await bounded(leaving, this.host.maxOpenFiles ?? 0, (s) => syncLeftHeader(fs, s));
      if (dirDirty) await fs.syncDir(this.host.dir);
    } catch (err) {
      throw this.latch(err);
    }
    // Header phase: publish what the data fsync covered, and persist commits.
    const headers = new Set<Segment>();
    try {
      for (const p of pending) {
        p.s.writeHeader(fs, p.end, p.count);
        headers.add(p.s);
      }
      for (const s of this.writeDirtyHeaders()) headers.add(s);
    } catch (err) {
      const failure = asIOError('header write failed', err);
      this.rollBack(failure);
      for (const p of pending) p.s.headerDirty = true;
      throw failure;
    }
    for (const s of headers) s.dataDirty = false;
    try {
      await bounded([...headers], this.host.maxOpenFiles ?? 0, (s) => s.datasync(fs, 'header'));
    } catch (err) {
      throw this.latch(err);
    }
    for (const p of pending) {
      p.s.writeCursor = Math.max(p.s.writeCursor, p.end);
      p.s.writtenCount = Math.max(p.s.writtenCount, p.count);
    }
    this.unsyncedBytes -= unsyncedBytes;
    this.unsyncedOps = Math.max(0, this.unsyncedOps - unsyncedOps);
    if (pending.length) this.host.published();
  }

  /** Latches on `err` (the first failure wins), rolls back, and returns the error to throw. */
  private latch(err: unknown): IOError {
    if (!this.latchedFlag) {
      this.latchedFlag = true;
      this.cause = err;
    }
    const failure = this.latchedError();
    this.rollBack(failure);
    return failure;
  }

  /**
   * Drops every written but unpublished record, including those of callers
   * waiting for the next flush, and rejects those callers with `err`.
   */
  private rollBack(err: unknown): void {
    this.group.failWaiting(err);
    for (const s of this.host.segments) {
      if (s.end > s.writeCursor) {
        this.host.rolledBack(s.endCount - s.writtenCount);
        s.end = s.writeCursor;
        s.endCount = s.writtenCount;
      }
    }
  }
}
