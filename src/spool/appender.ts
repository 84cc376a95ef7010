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
import { writeFrame, FRAME_OVERHEAD, MAX_RECORD_BYTES, SEGMENT_HEADER_SIZE } from './format.js';
import type { Flusher } from './flusher.js';
import type { ResolvedSpoolOptions } from './options.js';
import type { SpoolSegment } from './segment.js';
import { WriteBehind } from './write-behind.js';
import type { WrittenMemory } from './written-memory.js';

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
