/**
 * One segment file and its in-memory state.
 *
 * Three positions per segment, all file positions (header included):
 * - `end`/`endCount`: record bytes that reached the kernel. Under the per-op
 *   policy these run ahead of the published cursor until a group commit
 *   publishes them; under batched policies they equal it.
 * - `writeCursor`/`writtenCount`: published records, the ones readers see and
 *   the header names.
 * - `commitCursor`/`committedCount`: records retired by consumers.
 */
import type { FileHandle, FileSystem, SyncStep } from '../storage/fs.js';
import type { HandlePool } from './handle-pool.js';
import { segmentFileName } from '../storage/segment-names.js';
import { join } from 'node:path';
import {
  HEADER_SIZE,
  FORMAT_VERSION,
  FLAG_OVERSIZED,
  HeaderImage,
  frameRecord,
  checksumMatches,
  readUvarint,
  CHECKSUM_SIZE,
  MAX_UVARINT_BYTES,
} from './format.js';

export class Segment {
  /** Set when no further records may be appended (a later segment exists, or it is damaged). */
  sealed = false;
  /** Bytes written since its last completed fdatasync. */
  dataDirty = false;
  /** The in-memory header differs from the file's. */
  headerDirty = false;
  /** Taken out of the queue by a reclaim: its file is unlinked or about to be. */
  reclaimed = false;
  /** Records consumed from this segment by the read cursor (for loss accounting). */
  readCount: number;
  end: number;
  endCount: number;

  constructor(
    readonly seq: number,
    readonly path: string,
    public fh: FileHandle | undefined,
    readonly capacity: number,
    readonly flags: number,
    readonly segmentSize: number,
    public writeCursor: number,
    public writtenCount: number,
    public commitCursor: number,
    public committedCount: number,
  ) {
    this.end = writeCursor;
    this.endCount = writtenCount;
    this.readCount = committedCount;
  }

  /** File position one past the data region. */
  get limit(): number {
    return HEADER_SIZE + this.capacity;
  }

  /**
   * The file's length when it is shorter than its header says (a sealed
   * segment found cut short at open, which is not extended: nothing will be
   * appended to it).
   */
  fileSize: number | undefined;

  /** Bytes the file occupies on disk (header + preallocated data region). */
  get diskBytes(): number {
    return this.fileSize ?? HEADER_SIZE + this.capacity;
  }

  get oversized(): boolean {
    return (this.flags & FLAG_OVERSIZED) !== 0;
  }

  /** Every published record is committed, and nothing more can be appended. */
  /** `seq << 48` as a bigint: a record's offset is this plus its position (see `packOffset`). */
  get offsetBase(): bigint {
    return (this.base ??= BigInt(this.seq) << 48n);
  }
  private base: bigint | undefined;

  get retired(): boolean {
    return this.sealed && this.commitCursor >= this.writeCursor && this.end === this.writeCursor;
  }


  /** This segment's header bytes, rewritten in place on each header write. */
  private image: HeaderImage | undefined;
  /** Bounds open descriptors across segments; set by the queue when `maxOpenFiles` is on. */
  pool: HandlePool | undefined;
  /** Descriptors with an fdatasync in flight, and how many. */
  private pins = new Map<FileHandle, number>();

  handle(fs: FileSystem): FileHandle {
    this.fh ??= fs.open(this.path, 'rw');
    this.pool?.use(this);
    return this.fh;
  }

  /** Writes the header naming `writeCursor`/`writtenCount` as published. */
  writeHeader(fs: FileSystem, writeCursor = this.writeCursor, writtenCount = this.writtenCount): void {
    this.writeHeaderTo(this.handle(fs), writeCursor, writtenCount);
  }

  /** {@link writeHeader} through `fh`: for a segment out of the queue, whose own handle is closed. */
  writeHeaderTo(fh: FileHandle, writeCursor = this.writeCursor, writtenCount = this.writtenCount): void {
    this.image ??= new HeaderImage({ version: FORMAT_VERSION, flags: this.flags, capacity: this.capacity, segmentSize: this.segmentSize });
    fh.pwrite(this.image.encode(this.commitCursor, writeCursor, writtenCount, this.committedCount), 0, 'header');
    this.headerDirty = false;
    this.dataDirty = true;
  }

  /**
   * fdatasync on the thread pool. The descriptor is pinned meanwhile: closing
   * it (eviction by the handle pool, reclaim) waits for the sync to finish, so
   * its number cannot be reused by another file under the sync.
   */
  async datasync(fs: FileSystem, step: SyncStep): Promise<void> {
    // Taken out of the queue since the flush chose it: its file is being
    // removed, so there is nothing to make durable, and reopening its path
    // would fail once the unlink ran (and latch the queue).
    if (this.reclaimed) return;
    const fh = this.handle(fs);
    this.pins.set(fh, (this.pins.get(fh) ?? 0) + 1);
    try {
      await fh.datasync(step);
    } finally {
      const left = this.pins.get(fh)! - 1;
      if (left > 0) this.pins.set(fh, left);
      else {
        this.pins.delete(fh);
        if (fh !== this.fh) fh.close(); // closed while pinned
      }
    }
  }

  closeHandle(): void {
    const fh = this.fh;
    this.fh = undefined;
    this.pool?.forget(this);
    if (fh && !this.pins.has(fh)) fh.close();
  }

  /**
   * Creates a new, preallocated segment file. A full file system fails here
   * (the allocation), not later in the middle of a record; the partial file is
   * removed before the error is rethrown.
   */
  static create(fs: FileSystem, dir: string, seq: number, capacity: number, segmentSize: number, oversized: boolean, perm?: number): Segment {
    const path = join(dir, segmentFileName(seq));
    const fh = fs.open(path, 'create', perm);
    const seg = new Segment(seq, path, fh, capacity, oversized ? FLAG_OVERSIZED : 0, segmentSize, HEADER_SIZE, 0, HEADER_SIZE, 0);
    try {
      fh.allocate(HEADER_SIZE + capacity);
      seg.writeHeader(fs);
    } catch (err) {
      try {
        fh.close();
        fs.unlink(path);
      } catch {
        // the original failure is the one worth reporting
      }
      throw err;
    }
    return seg;
  }
}

/** What a checksum-verified walk of a data region found. */
export interface WalkResult {
  /** End of the last intact record. */
  end: number;
  /** Intact records from the start of the walk. */
  count: number;
  /**
   * With `resync`: records inside `end` whose payload failed its checksum but
   * behind which an intact record (or the limit) starts. They are left for the
   * reader, which reports each as one lost record.
   */
  damaged: number;
}

const WALK_BLOCK = 1 << 20;

/**
 * Walks records from `from` up to `limit` (both file positions), verifying
 * each checksum, and stops at the first record that is damaged, runs past the
 * limit, or is preallocated slack. Bounded: it reads at most `limit - from`
 * bytes and never allocates more than the largest record that fits.
 */
export function walkRecords(fh: FileHandle, from: number, limit: number, opts: { resync?: boolean } = {}): WalkResult {
  // Bytes past the end of the file cannot be read: a limit beyond it would
  // make the walk wait for a record that never arrives.
  limit = Math.min(limit, fh.size());
  let pos = from;
  let count = 0;
  let damaged = 0;
  let buf = new Uint8Array(Math.min(WALK_BLOCK, Math.max(0, limit - from)));
  let bufStart = pos;
  let bufLen = 0;
  while (pos < limit) {
    if (pos < bufStart || pos >= bufStart + bufLen) {
      bufStart = pos;
      bufLen = fh.pread(buf.subarray(0, Math.min(buf.length, limit - pos)), pos);
      if (bufLen === 0) break;
    }
    const f = frameRecord(buf, pos - bufStart, bufLen, limit - bufStart);
    if (f === 'length') break;
    if (f === 'need') {
      // The record runs past the buffer: reload from its start, growing the
      // buffer once if the record alone is larger than it.
      if (pos === bufStart) {
        const whole = frameLengthAt(fh, pos);
        if (whole === undefined || whole > limit - pos || whole <= bufLen) break; // a short read: nothing more to wait for
        buf = new Uint8Array(whole);
      }
      bufLen = 0;
      continue;
    }
    if (!checksumMatches(buf, f)) {
      // Damage, or zero-filled slack (an empty frame with a zero checksum).
      // A bad payload whose frame still leads to an intact record is stepped
      // over when asked; a bad length never is.
      const next = bufStart + f.end;
      const holds = f.payloadEnd > f.payloadStart && (next === limit || intactRecordAt(fh, next, limit));
      if (!opts.resync || !holds) break;
      pos = next;
      damaged++;
      continue;
    }
    pos = bufStart + f.end;
    count++;
  }
  return { end: pos, count, damaged };
}

/** Framed length of the record at `pos`, from its length prefix alone. */
function frameLengthAt(fh: FileHandle, pos: number): number | undefined {
  const head = new Uint8Array(MAX_UVARINT_BYTES);
  const v = readUvarint(head, 0, fh.pread(head, pos));
  return v ? v.size + v.value + CHECKSUM_SIZE : undefined;
}

/**
 * Whether an intact record starts at `pos`, read on its own (at most the
 * record's framed length, which must end by `limit`). After a checksum
 * failure this is what tells a damaged payload, behind which the next record
 * starts, from a damaged length, behind which no boundary can be believed.
 */
export function intactRecordAt(fh: FileHandle, pos: number, limit: number): boolean {
  const len = frameLengthAt(fh, pos);
  if (len === undefined || len > limit - pos) return false;
  const buf = new Uint8Array(len);
  const f = frameRecord(buf, 0, fh.pread(buf, pos), len);
  return f !== 'need' && f !== 'length' && checksumMatches(buf, f);
}

/**
 * One past the last non-zero byte in `[from, to)`, or `from` when every byte
 * there is zero (preallocated slack). Reads the span in 1 MiB blocks.
 */
export function dataEnd(fh: FileHandle, from: number, to: number): number {
  to = Math.min(to, fh.size());
  let end = from;
  const buf = new Uint8Array(Math.min(WALK_BLOCK, Math.max(0, to - from)));
  for (let pos = from; pos < to; pos += buf.length) {
    const n = fh.pread(buf.subarray(0, Math.min(buf.length, to - pos)), pos);
    for (let i = n - 1; i >= 0; i--) {
      if (buf[i] !== 0) {
        end = pos + i + 1;
        break;
      }
    }
    if (n === 0) break;
  }
  return end;
}
