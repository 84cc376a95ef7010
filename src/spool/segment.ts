/**
 * One spool segment file: its number, how many bytes it holds, how many of
 * those a completed fdatasync covers, and a descriptor opened on first use.
 *
 * A descriptor whose fdatasync failed is never synced again: Linux may have
 * marked the pages clean after reporting the error once, so a second fsync on
 * it could claim durability that is not there. `reopen()` drops it.
 */
import { join } from 'node:path';
import type { FileHandle, FileSystem } from '../storage/fs.js';
import { spoolSegmentNames } from '../storage/segment-names.js';
import { asIOError } from '../errors.js';
import { encodeSegmentHeader, FRAME_OVERHEAD, SEGMENT_HEADER_SIZE } from './format.js';
import type { WrittenMemory } from './written-memory.js';

/**
 * A read found fewer bytes than the spool knows it wrote there: the file was
 * cut underneath it. That is damage, not a passing I/O error; retrying the
 * read would fail the same way forever.
 */
export class ShortReadError extends Error {
  readonly code = 'ESHORT';
}

/** Bytes read at once when the head reads a frame; later frames come from memory. */
const READ_AHEAD = 64 * 1024;
const EMPTY = new Uint8Array(0);
/** Bytes this process wrote at a file position, kept for the head to read. */
interface Written {
  from: number;
  bytes: Uint8Array;
}

export class SpoolSegment {
  /** No more frames go here (its end is damaged or unknown); the next append rotates. */
  sealed = false;
  /**
   * The size each rollback cut this segment back to, oldest first. A record
   * handed out before a rollback is gone only if a cut since then went below
   * its end; one that ends below every such cut is still there, byte for byte.
   */
  private cuts: number[] = [];
  /**
   * Removed from the spool (consumed, or cut away by a rollback). A flush
   * that listed it skips it: every record in a consumed segment is committed,
   * so nothing in it needs to be durable, and its file may be gone.
   */
  retired = false;
  private handle: FileHandle | undefined;
  private syncing = 0;
  private cache: Uint8Array = EMPTY;
  private cacheFrom = 0;
  private closeWhenIdle = false;
  /** Where the bytes of {@link remember} are counted; nothing is kept without one. */
  budget: WrittenMemory | undefined;
  /** Runs of whole frames this process wrote, in file order, not yet passed by the head. */
  private written: Written[] = [];
  private writtenBytes = 0;
  /** Index in {@link written} of the run the last {@link ownFrame} found. */
  private writtenHint = 0;

  constructor(
    private readonly fs: FileSystem,
    readonly seq: number,
    readonly path: string,
    /** Bytes in the file, header included. */
    public size: number,
    /** Bytes a completed fdatasync covers; 0 for a file whose name is not known to be durable. */
    public durable: number,
    handle?: FileHandle,
  ) {
    this.handle = handle;
  }

  /** Creates segment `seq` in `dir` with its header written (not synced). */
  static create(fs: FileSystem, dir: string, seq: number): SpoolSegment {
    const path = join(dir, spoolSegmentNames.fileName(seq));
    let h: FileHandle | undefined;
    try {
      h = fs.open(path, 'create');
      h.pwrite(encodeSegmentHeader(), 0, 'header');
    } catch (err) {
      if (h) {
        try {
          h.close();
          fs.unlink(path);
        } catch {
          // a zero-length or header-less leftover is dropped at the next open
        }
      }
      throw asIOError(`cannot create segment ${path}`, err);
    }
    return new SpoolSegment(fs, seq, path, SEGMENT_HEADER_SIZE, 0, h);
  }

  /** How many rollbacks have cut this segment; a pop remembers it to ask {@link intactSince} later. */
  get epoch(): number {
    return this.cuts.length;
  }

  /** Notes that a rollback cut this segment back to `size` bytes (header included). */
  cutTo(size: number): void {
    this.cuts.push(size);
  }

  /**
   * Whether the bytes below `end` are still the ones that were there at
   * `epoch`: no rollback since then cut the segment shorter than `end`.
   * Bytes past a cut are rewritten by later appends, so a record that was
   * cut may have another in its place at the same offset.
   */
  intactSince(epoch: number, end: number): boolean {
    for (let k = epoch; k < this.cuts.length; k++) if (this.cuts[k]! < end) return false;
    return true;
  }

  /** The descriptor, opened read-write on first use (throws the system error, e.g. ENOENT). */
  file(): FileHandle {
    this.handle ??= this.fs.open(this.path, 'rw');
    return this.handle;
  }

  /**
   * Exactly `len` bytes at `pos` (throws when the file is shorter). Served
   * from a read-ahead window when it covers them: frames below `size` never
   * change except by {@link truncate}, which drops the window. The result may
   * be a view into that window; callers copy what they keep.
   */
  read(pos: number, len: number): Uint8Array {
    if (pos >= this.cacheFrom && pos + len <= this.cacheFrom + this.cache.length) {
      return this.cache.subarray(pos - this.cacheFrom, pos - this.cacheFrom + len);
    }
    const want = Math.min(Math.max(len, READ_AHEAD), Math.max(len, this.size - pos));
    const buf = new Uint8Array(want);
    const n = this.file().pread(buf, pos);
    if (n < len) throw new ShortReadError(`short read of ${this.path} at ${pos}: ${n} of ${len} bytes`);
    if (want <= READ_AHEAD) {
      this.cache = buf.subarray(0, n);
      this.cacheFrom = pos;
    }
    return buf.subarray(0, len);
  }

  /**
   * Keeps `bytes`, whole frames just written at `at`, so the head can take
   * them from memory: they are what the file holds there, so they need
   * neither a read nor a checksum. The caller never writes into `bytes`
   * again. Ignored when the {@link budget} has no room: the head then reads
   * those frames from the file, as after a restart.
   */
  remember(at: number, bytes: Uint8Array): void {
    const budget = this.budget;
    if (!budget || this.retired) return;
    const last = this.written.at(-1);
    // Runs after a gap (one not kept) are fine; out of order would break the search.
    if (last && last.from + last.bytes.length > at) return;
    if (!budget.keep(bytes)) return;
    this.written.push({ from: at, bytes });
    this.writtenBytes += bytes.length;
  }

  /** Set by {@link ownRun}: where the frame's payload starts in the bytes it returned, and its length. */
  ownStart = 0;
  ownLength = 0;

  /**
   * The bytes of the run this process wrote that holds the whole frame at
   * `at`, with the frame's payload at {@link ownStart} in them for
   * {@link ownLength} bytes; undefined when no kept run holds it (read the
   * file). `at` must be where a frame starts. No view is made: a pop of many
   * records takes their positions straight from the run.
   */
  ownRun(at: number): Uint8Array | undefined {
    const runs = this.written;
    let i = this.writtenHint < runs.length && runs[this.writtenHint]!.from <= at ? this.writtenHint : 0;
    for (; i < runs.length; i++) {
      const run = runs[i]!;
      const rel = at - run.from;
      if (rel < 0) return undefined;
      const b = run.bytes;
      if (rel >= b.length) continue;
      this.writtenHint = i;
      const n = ((b[rel]! << 24) | (b[rel + 1]! << 16) | (b[rel + 2]! << 8) | b[rel + 3]!) >>> 0;
      if (rel + FRAME_OVERHEAD + n > b.length) return undefined;
      this.ownStart = rel + FRAME_OVERHEAD;
      this.ownLength = n;
      return b;
    }
    return undefined;
  }

  /**
   * The payload of the frame at `at` when this process wrote it and still
   * holds it (a view the caller copies), else undefined: read the file.
   * `at` must be where a frame starts.
   */
  ownFrame(at: number): Uint8Array | undefined {
    const b = this.ownRun(at);
    return b && b.subarray(this.ownStart, this.ownStart + this.ownLength);
  }

  /** Drops the runs that end at or before `pos` (the head moved past them). */
  forgetBelow(pos: number): void {
    const runs = this.written;
    let n = 0;
    while (n < runs.length && runs[n]!.from + runs[n]!.bytes.length <= pos) {
      const b = runs[n++]!.bytes;
      this.writtenBytes -= b.length;
      this.budget?.forget(b);
    }
    if (n === 0) return;
    runs.splice(0, n);
    this.writtenHint = 0;
  }

  /** Drops every run this process wrote (a cut may put other bytes where they were, or the segment is gone). */
  forgetWritten(): void {
    for (const run of this.written) this.budget?.forget(run.bytes);
    this.written = [];
    this.writtenBytes = 0;
    this.writtenHint = 0;
  }

  /** Cuts the file to `length` bytes and forgets what was read ahead and written. */
  truncate(length: number): void {
    this.dropCache();
    this.forgetWritten();
    this.file().truncate(length);
  }

  private dropCache(): void {
    this.cache = EMPTY;
    this.cacheFrom = 0;
  }

  /** fdatasync; the descriptor stays open until it completes even if the segment is retired meanwhile. */
  async datasync(): Promise<void> {
    const h = this.file();
    this.syncing++;
    try {
      await h.datasync('data');
    } finally {
      this.syncing--;
      if (this.syncing === 0 && this.closeWhenIdle) this.close();
    }
  }

  /** Drops the descriptor (a fresh one is opened on next use), the read-ahead window and the runs written (a rollback follows). */
  reopen(): void {
    this.forgetWritten();
    this.closeHandle();
  }

  /**
   * Closes the descriptor, after any fdatasync in flight. The runs this
   * process wrote are kept (they are still what the file holds) unless the
   * segment is retired.
   */
  close(): void {
    if (this.retired) this.forgetWritten();
    if (this.syncing > 0) {
      this.closeWhenIdle = true;
      return;
    }
    this.closeWhenIdle = false;
    this.closeHandle();
  }

  private closeHandle(): void {
    this.dropCache();
    const h = this.handle;
    this.handle = undefined;
    if (h && this.syncing === 0) {
      try {
        h.close();
      } catch {
        // the descriptor is abandoned either way
      }
    }
  }
}
