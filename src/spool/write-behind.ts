/**
 * Frames accepted by `appendNoSync` that have not reached the kernel yet.
 * One pwrite per record would cap a group-committing producer near the
 * syscall rate; staging consecutive frames of the tail and writing them in
 * one pwrite (at the end of the event-loop turn, when 256 KiB are staged, or
 * before anything reads the tail, syncs or rotates) costs one syscall per
 * burst. The contract does not change: an unsynced record may be lost by a
 * crash until `sync()` resolves.
 */
import type { SpoolSegment } from './segment.js';

/** Staged bytes that trigger a write at once. */
const HIGH_WATER = 256 * 1024;

export interface Staged {
  seg: SpoolSegment;
  /** File position of the first staged byte. */
  at: number;
  bytes: Uint8Array;
}

export class WriteBehind {
  private buf = new Uint8Array(64 * 1024);
  private len = 0;
  private seg: SpoolSegment | undefined;
  private at = 0;
  private timer: NodeJS.Immediate | undefined;

  constructor(private readonly idle: () => void) {}

  /** Bytes staged. */
  get size(): number {
    return this.len;
  }

  /**
   * Space for a frame of `n` bytes that goes at `at` in `seg`, right after
   * what is staged; undefined when it does not continue the staged run or is
   * too large to stage (the caller writes staged bytes and then the frame).
   */
  reserve(seg: SpoolSegment, at: number, n: number): Uint8Array | undefined {
    if (this.len > 0 && (seg !== this.seg || at !== this.at + this.len)) return undefined;
    if (this.len + n > HIGH_WATER) return undefined;
    if (this.buf.length < this.len + n) {
      const next = new Uint8Array(Math.min(HIGH_WATER, Math.max(this.len + n, this.buf.length * 2)));
      next.set(this.buf.subarray(0, this.len));
      this.buf = next;
    }
    if (this.len === 0) {
      this.seg = seg;
      this.at = at;
    }
    return this.buf.subarray(this.len, this.len + n);
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

  /** Hands over the staged bytes (a view valid until the next reserve) and empties the stage. */
  take(): Staged | undefined {
    if (this.len === 0) return undefined;
    const out = { seg: this.seg!, at: this.at, bytes: this.buf.subarray(0, this.len) };
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
