/**
 * The memory behind the frames a spool keeps of its own writes (segment.ts,
 * `remember`): a byte budget, and the staging blocks `appendNoSync` frames
 * are built in (write-behind.ts). A written burst is a view into a block; a
 * block goes back to a small free list once the stage has moved past it and
 * the head has passed every burst kept from it, so a steady producer reuses
 * a few blocks instead of allocating (and zeroing) one per burst, which in
 * turn made V8 run a full garbage collection every few megabytes.
 */

/** Bytes of one staging block: the most staged at once. */
export const STAGE_BLOCK_BYTES = 256 * 1024;
/** Free blocks kept for reuse; more are left to the garbage collector. */
const FREE_BLOCKS = 8;

export class WrittenMemory {
  /** Bytes of kept bursts now. */
  bytes = 0;
  /**
   * Set by the first pop: a spool nobody pops from in this process (a
   * producer only, such as `ferry push`) keeps nothing, since nothing would
   * ever read it from memory.
   */
  consuming = false;
  /** Users of each block in use: the stage, and each kept burst in it. */
  private readonly users = new WeakMap<ArrayBufferLike, number>();
  private readonly free: Uint8Array[] = [];

  constructor(
    /** The most bytes of bursts kept at once. */
    readonly max: number,
  ) {}

  /** A staging block (zeroed or not: the stage overwrites what it hands out), counted as used by the stage. */
  acquire(): Uint8Array {
    const block = this.free.pop() ?? new Uint8Array(STAGE_BLOCK_BYTES);
    this.users.set(block.buffer, 1);
    return block;
  }

  /** Whether a burst of `n` bytes may be kept; when it may, counts it (and its block's user). */
  keep(bytes: Uint8Array): boolean {
    if (!this.consuming || this.bytes + bytes.length > this.max) return false;
    this.bytes += bytes.length;
    const users = this.users.get(bytes.buffer);
    if (users !== undefined) this.users.set(bytes.buffer, users + 1);
    return true;
  }

  /** One more user of `buffer`'s block (a burst handed over by the stage, until its taker released it). */
  retain(buffer: ArrayBufferLike): void {
    const users = this.users.get(buffer);
    if (users !== undefined) this.users.set(buffer, users + 1);
  }

  /** A kept burst was dropped. */
  forget(bytes: Uint8Array): void {
    this.bytes -= bytes.length;
    this.release(bytes.buffer);
  }

  /** One user (the stage, or a kept burst) let go of `buffer`'s block; the last one frees it. */
  release(buffer: ArrayBufferLike): void {
    const users = this.users.get(buffer);
    if (users === undefined) return; // not a staging block
    if (users > 1) {
      this.users.set(buffer, users - 1);
      return;
    }
    this.users.delete(buffer);
    if (this.free.length < FREE_BLOCKS && buffer.byteLength === STAGE_BLOCK_BYTES) this.free.push(new Uint8Array(buffer));
  }
}
