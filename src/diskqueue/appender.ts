/**
 * Placing records at the tail of a DiskQueue: cap checks, rolling to a new
 * segment, framing into a scratch buffer, and one pwrite per run of records
 * that share a segment (plus, under batched policies, the header that
 * publishes them). Everything here is synchronous: when a call returns, its
 * bytes are in the kernel, so no other call can interleave with a placement.
 */
import { FullError, RecordTooLargeError } from '../errors.js';
import { encodeRecord, frameSize } from './format.js';
import { Segment } from './segment.js';
import { asIOError } from '../errors.js';
import type { Flusher } from './flusher.js';
import type { ResolvedOptions } from './options.js';
import type { Waiters } from '../storage/waiters.js';

/** Most bytes one record write carries; longer runs are split. */
const RUN_BYTES = 4 << 20;

/** What the appender needs of its queue. */
export interface AppendHost {
  readonly dir: string;
  readonly opts: ResolvedOptions<any>;
  readonly segments: Segment[];
  readonly counters: { added: number; rejectedFull: number };
  readonly published: Waiters;
  /** Framed bytes written and not yet committed. */
  backlogBytes(): number;
  /** Puts a new segment's descriptor under the `maxOpenFiles` bound. */
  adopt(seg: Segment): void;
}

export class Appender {
  /** Highest segment number the directory has used: new segments are numbered above it. */
  highestSeq = 0;
  private scratch = new Uint8Array(4096);
  /** The run being framed in `scratch`: its segment, bytes and record count. */
  private runSeg: Segment | undefined;
  private runBytes = 0;
  private runCount = 0;

  constructor(
    private readonly host: AppendHost,
    private readonly flusher: Flusher,
  ) {}

  /**
   * Writes one record. `bypassCaps` is for requeue, which must work on a
   * full queue.
   *
   * @throws FullError, RecordTooLargeError, IOError; nothing was written then.
   */
  placeOne(payload: Uint8Array, bypassCaps: boolean): void {
    const size = this.admit(payload, bypassCaps, bypassCaps || this.host.opts.maxBytes === 0 ? 0 : this.host.backlogBytes());
    const seg = this.segmentFor(size, bypassCaps);
    this.frame(payload, size);
    this.runSeg = seg;
    this.flushRun();
  }

  /**
   * Writes records in order, each run that shares a segment with one pwrite.
   * Stops at the first record that cannot be placed and returns how many
   * were, with the error.
   */
  placeAll(payloads: Uint8Array[], bypassCaps: boolean): { placed: number; error?: unknown } {
    let placed = 0;
    let backlog = this.host.opts.maxBytes > 0 ? this.host.backlogBytes() : 0;
    try {
      for (const payload of payloads) {
        const size = this.admit(payload, bypassCaps, backlog);
        let seg = this.tail();
        if (!seg || seg.end + this.runBytes + size > seg.limit || this.runBytes + size > RUN_BYTES) {
          placed += this.flushRun();
          seg = this.segmentFor(size, bypassCaps);
        }
        this.runSeg = seg;
        this.frame(payload, size);
        backlog += size;
        if (seg.oversized) placed += this.flushRun();
      }
      placed += this.flushRun();
    } catch (error) {
      try {
        placed += this.flushRun();
      } catch (writeError) {
        return { placed, error: writeError };
      }
      return { placed, error };
    }
    return { placed };
  }

  /** Checks the caps for one record; returns its framed size. */
  private admit(payload: Uint8Array, bypassCaps: boolean, backlog: number): number {
    const size = frameSize(payload.length);
    const { maxBytes } = this.host.opts;
    if (maxBytes > 0 && size > maxBytes) {
      throw new RecordTooLargeError(`record of ${size} framed bytes exceeds maxBytes ${maxBytes}`);
    }
    if (!bypassCaps && maxBytes > 0 && backlog + size > maxBytes) {
      this.host.counters.rejectedFull++;
      throw new FullError(`backlog would exceed maxBytes ${maxBytes}`);
    }
    return size;
  }

  /** The tail segment if `size` more bytes fit after the run framed so far, else a new one. */
  private segmentFor(size: number, bypassCaps: boolean): Segment {
    const seg = this.tail();
    if (seg && seg.end + this.runBytes + size <= seg.limit) return seg;
    const { maxSegments, segmentSize } = this.host.opts;
    if (!bypassCaps && maxSegments > 0 && this.host.segments.length >= maxSegments) {
      this.host.counters.rejectedFull++;
      throw new FullError(`queue holds maxSegments ${maxSegments} segments`);
    }
    return this.roll(size > segmentSize ? size : segmentSize, size > segmentSize);
  }

  /** Frames `payload` at the end of the run in `scratch`. */
  private frame(payload: Uint8Array, size: number): void {
    const need = this.runBytes + size;
    if (this.scratch.length < need) {
      const grown = new Uint8Array(Math.max(need, this.scratch.length * 2));
      grown.set(this.scratch.subarray(0, this.runBytes));
      this.scratch = grown;
    }
    this.runBytes += encodeRecord(payload, this.scratch, this.runBytes);
    this.runCount++;
  }

  /**
   * Writes the framed run; returns how many records it held. The run is
   * taken before it is written, so a run whose write failed is not written a
   * second time by a later flush.
   */
  private flushRun(): number {
    const seg = this.runSeg;
    const bytes = this.runBytes;
    const count = this.runCount;
    this.runBytes = 0;
    this.runCount = 0;
    if (!seg || count === 0) return 0;
    this.writeRun(seg, bytes, count);
    return count;
  }

  /** Writes `bytes` of framed records from `scratch` at the end of `seg`. */
  private writeRun(seg: Segment, bytes: number, count: number): void {
    const { fs, perOp } = this.host.opts;
    try {
      seg.handle(fs).pwrite(this.scratch.subarray(0, bytes), seg.end, 'record');
    } catch (err) {
      throw asIOError(`record write to ${seg.path} failed`, err);
    }
    seg.end += bytes;
    seg.endCount += count;
    seg.dataDirty = true;
    this.host.counters.added += count;
    if (seg.oversized) seg.sealed = true;
    if (perOp) return;
    try {
      seg.writeHeader(fs, seg.end, seg.endCount);
    } catch (err) {
      seg.end = seg.writeCursor;
      seg.endCount = seg.writtenCount;
      seg.headerDirty = true;
      this.host.counters.added -= count;
      throw asIOError(`header write to ${seg.path} failed`, err);
    }
    seg.writeCursor = seg.end;
    seg.writtenCount = seg.endCount;
    this.flusher.unsyncedBytes += bytes;
    this.host.published.wakeAll();
  }

  /** The segment appends go to, if it can take more. */
  private tail(): Segment | undefined {
    const segs = this.host.segments;
    const last = segs[segs.length - 1];
    return last && !last.sealed ? last : undefined;
  }

  /** Creates the next segment and makes it the tail. */
  roll(capacity: number, oversized: boolean): Segment {
    const { fs, segmentSize, fileMode } = this.host.opts;
    const segs = this.host.segments;
    const last = segs[segs.length - 1];
    const seq = Math.max(last?.seq ?? 0, this.highestSeq) + 1;
    let seg: Segment;
    try {
      seg = Segment.create(fs, this.host.dir, seq, capacity, segmentSize, oversized, fileMode);
    } catch (err) {
      throw asIOError(`cannot create segment ${seq}`, err);
    }
    if (last) last.sealed = true;
    this.highestSeq = seq;
    this.host.adopt(seg);
    segs.push(seg);
    this.flusher.dirDirty = true;
    return seg;
  }
}
