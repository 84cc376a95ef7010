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
import { encodeSegmentHeader, SEGMENT_HEADER_SIZE } from './format.js';

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

  /** Cuts the file to `length` bytes and forgets what was read ahead. */
  truncate(length: number): void {
    this.dropCache();
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

  /** Drops the descriptor (a fresh one is opened on next use) and the read-ahead window. */
  reopen(): void {
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

  /** Closes the descriptor, after any fdatasync in flight. */
  close(): void {
    if (this.syncing > 0) {
      this.closeWhenIdle = true;
      return;
    }
    this.closeWhenIdle = false;
    this.reopen();
  }
}
