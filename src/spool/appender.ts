/**
 * Placing records at the tail of a spool: the size and cap checks, rotating
 * to a new segment, framing, and the write itself. An `append` frame is
 * written at once from a reusable buffer; `appendNoSync` frames are staged
 * (`write-behind.ts`) and reach the kernel in one write per burst.
 * Everything here is synchronous: when a call returns, its frame is placed,
 * so no other call can interleave with a placement. The spool's counterpart
 * of the DiskQueue's `diskqueue/appender.ts`, talking to the spool through
 * {@link AppendHost}.
 */
import { ExceedsCapError, FullError, InvalidArgumentError, RecordTooLargeError } from '../errors.js';
import { asIOError } from '../errors.js';
import { writeFrame, writeFrames, FRAME_OVERHEAD, MAX_RECORD_BYTES, SEGMENT_HEADER_SIZE } from './format.js';
import type { Flusher } from './flusher.js';
import type { ResolvedSpoolOptions } from './options.js';
import type { SpoolSegment } from './segment.js';
import { WriteBehind } from './write-behind.js';
import { STAGE_BLOCK_BYTES, type WrittenMemory } from './written-memory.js';

/** Largest frame built in the reusable buffer. */
const SCRATCH_MAX = 1 << 20;

/** What the appender needs of its spool. */
export interface AppendHost {
  readonly opts: ResolvedSpoolOptions;
  /** The segments, oldest first; the last is the tail. */
  readonly segments: SpoolSegment[];
  readonly counters: { appended: number; full: number };
  /** Undelivered bytes, what `maxBytes` caps. */
  backlogBytes(): number;
  /** Whether the head has read everything in the only segment (a rotation then retires it). */
  headAtTailEnd(): boolean;
  /** Creates the next segment and makes it the tail. */
  addSegment(): SpoolSegment;
  /** Deletes the head segment, fully consumed. */
  retireHead(): void;
  /** Closes a segment's descriptor unless the spool still uses it often. */
  release(seg: SpoolSegment): void;
  /** A frame was placed and is readable: wakes `signal()`. */
  placed(): void;
  /** Where staging blocks come from (and go back to once nothing kept is in them). */
  readonly written: WrittenMemory;
}

export class Appender {
  private scratch = new Uint8Array(64 * 1024);
  private readonly behind: WriteBehind;

  constructor(
    private readonly host: AppendHost,
    private readonly flusher: Flusher,
  ) {
    this.behind = new WriteBehind(() => this.writeStaged(), host.written);
  }

  /**
   * Checks, rotates and writes one frame, synchronously. `ignoreCap` marks a
   * requeue's copy, which must fit even in a full spool (the commit right
   * after it frees as much).
   *
   * @throws InvalidArgumentError, RecordTooLargeError, ExceedsCapError, FullError, IOError; nothing was placed then.
   */
  place(data: Uint8Array, noSync: boolean, ignoreCap: boolean): void {
    if (!(data instanceof Uint8Array)) throw new InvalidArgumentError('a record must be a Uint8Array');
    if (data.length > MAX_RECORD_BYTES) throw new RecordTooLargeError(`record of ${data.length} bytes exceeds MAX_RECORD_BYTES`);
    const size = FRAME_OVERHEAD + data.length;
    this.refuseAfterLostGroup(ignoreCap);
    const segs = this.host.segments;
    if (segs.length === 0) this.host.addSegment();
    let tail = segs[segs.length - 1]!;
    const rotate = tail.sealed || (tail.size > SEGMENT_HEADER_SIZE && tail.size + size > this.host.opts.segmentBytes);
    const headAtTailEnd = this.host.headAtTailEnd();
    if (!ignoreCap) {
      const max = this.host.opts.maxBytes;
      if (size > max) {
        this.host.counters.full++;
        throw new ExceedsCapError(`record of ${data.length} bytes can never fit under maxBytes ${max}`);
      }
      if (this.host.backlogBytes() + size + (rotate && !headAtTailEnd ? SEGMENT_HEADER_SIZE : 0) > max) {
        this.host.counters.full++;
        throw new FullError(`spool backlog would pass maxBytes ${max}`);
      }
    }
    if (rotate) {
      this.writeStaged();
      this.refuseAfterLostGroup(ignoreCap);
      const sealed = tail;
      tail = this.host.addSegment();
      if (headAtTailEnd) this.host.retireHead();
      else this.host.release(sealed);
    }
    let room = noSync ? this.behind.reserve(tail, tail.size, size) : -1;
    if (room < 0) {
      // Staged frames go first; a failure there cuts them and moves the end.
      this.writeStaged();
      this.refuseAfterLostGroup(ignoreCap);
      if (noSync) room = this.behind.reserve(tail, tail.size, size);
    }
    const at = tail.size;
    if (room >= 0) {
      writeFrame(data, this.behind.buffer, room);
      this.behind.staged(size);
    } else {
      // Appends write synchronously, so one buffer serves them all; a frame
      // too large to be worth keeping one for gets its own.
      if (this.scratch.length < size && size <= SCRATCH_MAX) this.scratch = new Uint8Array(Math.min(SCRATCH_MAX, Math.max(size, this.scratch.length * 2)));
      const buf = size <= this.scratch.length ? this.scratch : new Uint8Array(size);
      const frame = buf.subarray(0, writeFrame(data, buf));
      try {
        tail.file().pwrite(frame, at, 'record');
      } catch (err) {
        undoWrite(tail, at);
        throw asIOError(`cannot write to spool segment ${tail.path}`, err);
      }
    }
    tail.size = at + size;
    this.flusher.wrote(noSync);
    this.host.counters.appended++;
    this.host.placed();
  }

  /**
   * Stages records `from`, `from + 1`, … (before `to`) of a run (record `k`
   * is `bytes[starts[k], starts[k] + lengths[k])`) as `appendNoSync` frames,
   * for as long as each one passes every check of {@link place} without
   * anything to do: no group loss to report, the tail takes it without
   * rotating, the backlog stays within `maxBytes`, and it continues the
   * staged frames within one staging block. Those are framed in one go
   * (`writeFrames`) and counted once. Returns how many it placed: 0 when the
   * record at `from` needs {@link place} (rotation, a full spool, a record
   * too large, a stage to write first), which the caller then calls for it.
   * The caller has checked the run's shape.
   */
  stageRun(bytes: Uint8Array, starts: readonly number[], lengths: readonly number[], from: number, to: number): number {
    if (this.flusher.lostGroup) return 0;
    const segs = this.host.segments;
    const tail = segs[segs.length - 1];
    if (tail === undefined || tail.sealed) return 0;
    const { maxBytes, segmentBytes } = this.host.opts;
    const staged = this.behind.size;
    let backlog = this.host.backlogBytes();
    let end = tail.size;
    let k = from;
    for (; k < to; k++) {
      const size = FRAME_OVERHEAD + lengths[k]!;
      if (lengths[k]! > MAX_RECORD_BYTES) break;
      if (end > SEGMENT_HEADER_SIZE && end + size > segmentBytes) break; // place() rotates
      if (backlog + size > maxBytes) break; // place() refuses it (full, or over the cap)
      if (staged + (end - tail.size) + size > STAGE_BLOCK_BYTES) break; // place() writes the stage first
      backlog += size;
      end += size;
    }
    const n = k - from;
    if (n === 0) return 0;
    const total = end - tail.size;
    const room = this.behind.reserve(tail, tail.size, total);
    if (room < 0) return 0; // the stage holds another segment's frames: place() writes them first
    writeFrames(bytes, starts, lengths, from, k, this.behind.buffer, room);
    this.behind.staged(total);
    tail.size = end;
    this.flusher.wrote(true, n);
    this.host.counters.appended += n;
    this.host.placed();
    return n;
  }

  /**
   * Throws `GroupLostError` when frames of the group were cut since the last
   * sync and no `sync()` has reported it yet: a record placed now would land
   * where the cut ones were, ahead of their re-append, and a reader would
   * get it out of order, after a gap. The loss stays for `sync()` to report.
   * A requeue's copy (`ignoreCap`) is not the producer's and goes through.
   */
  private refuseAfterLostGroup(ignoreCap: boolean): void {
    if (!ignoreCap && this.flusher.lostGroup) throw this.flusher.refusedAfterLoss();
  }

  /**
   * Writes the frames `appendNoSync` staged (before anything reads the tail,
   * syncs or rotates). They were accepted already, so a failure here cannot
   * reject anybody: it cuts them off again and the next `sync()` reports the
   * group lost.
   */
  writeStaged(): void {
    const st = this.behind.take();
    if (!st) return;
    try {
      st.seg.file().pwrite(st.bytes, st.at, 'record');
    } catch (err) {
      undoWrite(st.seg, st.at);
      st.seg.size = st.at;
      this.flusher.lostStaged(err);
      this.host.written.release(st.bytes.buffer);
      return;
    }
    // The head reads these frames from memory rather than the file (a
    // sender close behind the producer would otherwise read and hash
    // every record a second time).
    st.seg.remember(st.at, st.bytes);
    // Kept or not, the burst's own hold on its block (see `take`) ends here.
    this.host.written.release(st.bytes.buffer);
  }

  /** Forgets the staged frames unwritten: a rollback cut the place they were going. */
  dropStaged(): void {
    const st = this.behind.take();
    if (st) this.host.written.release(st.bytes.buffer);
  }

  /** Stops the end-of-turn write (at close, after the last {@link writeStaged}). */
  stop(): void {
    this.behind.stop();
  }
}

/** A failed write may have left part of a frame: cut it, or seal the segment when even that fails. */
function undoWrite(seg: SpoolSegment, at: number): void {
  try {
    seg.truncate(at);
  } catch {
    seg.sealed = true;
  }
}
