/**
 * Frames accepted by `appendNoSync` that have not reached the kernel yet.
 * One pwrite per record would cap a group-committing producer near the
 * syscall rate; staging consecutive frames of the tail and writing them in
 * one pwrite (at the end of the event-loop turn, when 256 KiB are staged, or
 * before anything reads the tail, syncs or rotates) costs one syscall per
 * burst. The contract does not change: an unsynced record may be lost by a
 * crash until `sync()` resolves.
 *
 * A burst handed over by {@link WriteBehind.take} is not written into
 * again while the segment keeps it (the next burst goes after it, or into
 * another block; written-memory.ts reuses a block only when nothing kept is
 * in it), so the segment can serve reads of those frames from memory
 * (segment.ts, `remember`).
 */
import type { SpoolSegment } from './segment.js';
import { STAGE_BLOCK_BYTES, type WrittenMemory } from './written-memory.js';

/** Staged bytes that trigger a write at once: one block. */
const HIGH_WATER = STAGE_BLOCK_BYTES;
/** A taken burst's block goes on being filled after it while this much is left. */
const MIN_REST = 16 * 1024;

export interface Staged {
  seg: SpoolSegment;
  /** File position of the first staged byte. */
  at: number;
  bytes: Uint8Array;
}

export class WriteBehind {
  /** The rest of the current block, from the first staged byte on. */
  private buf: Uint8Array;
  private len = 0;
  private seg: SpoolSegment | undefined;
  private at = 0;
  private timer: NodeJS.Immediate | undefined;

  constructor(
    private readonly idle: () => void,
    private readonly memory: WrittenMemory,
  ) {
    this.buf = memory.acquire();
  }

  /** Bytes staged. */
  get size(): number {
    return this.len;
  }

  /**
   * Space for a frame of `n` bytes that goes at `at` in `seg`, right after
   * what is staged: its index in {@link buffer}, or -1 when it does not
   * continue the staged run or is too large to stage (the caller writes
   * staged bytes and then the frame).
   */
  reserve(seg: SpoolSegment, at: number, n: number): number {
    if (this.len > 0 && (seg !== this.seg || at !== this.at + this.len)) return -1;
    if (this.len + n > HIGH_WATER) return -1;
    if (this.buf.length < this.len + n) {
      // The rest of this block is too short: the staged frames move to a new one.
      const next = this.memory.acquire();
      next.set(this.buf.subarray(0, this.len));
      this.memory.release(this.buf.buffer);
      this.buf = next;
    }
    if (this.len === 0) {
      this.seg = seg;
      this.at = at;
    }
    return this.len;
  }

  /** The staging buffer, valid for the frame just reserved. */
  get buffer(): Uint8Array {
    return this.buf;
  }

  /** Counts `n` reserved bytes as staged, and makes sure they are written this turn. */
  staged(n: number): void {
    this.len += n;
    if (!this.timer) {
      this.timer = setImmediate(() => {
        this.timer = undefined;
        this.idle();
      });
      this.timer.unref();
    }
  }

  /**
   * Hands over the staged bytes (a view the stage never writes into again)
   * and empties the stage. The burst holds its block as a user of its own:
   * the taker releases it (`memory.release(bytes.buffer)`) once it kept the
   * burst or not. Without that, a stage moving to a new block let go of the
   * old one before the segment counted the burst it keeps there, and could
   * take the same block back from the free list and stage over the burst.
   */
  take(): Staged | undefined {
    if (this.len === 0) return undefined;
    const out = { seg: this.seg!, at: this.at, bytes: this.buf.subarray(0, this.len) };
    this.memory.retain(this.buf.buffer);
    if (this.buf.length - this.len >= MIN_REST) {
      this.buf = this.buf.subarray(this.len);
    } else {
      this.memory.release(this.buf.buffer);
      this.buf = this.memory.acquire();
    }
    this.len = 0;
    this.seg = undefined;
    return out;
  }

  /** Stops the end-of-turn write (at close). */
  stop(): void {
    if (this.timer) clearImmediate(this.timer);
    this.timer = undefined;
  }
}
