/**
 * Spool: a bounded, durable FIFO byte queue on a directory of segment files,
 * after the Go spool (github.com/JohanLindvall/spool), for store-and-forward:
 * a producer appends records it must not lose, a consumer pops, delivers, and
 * commits only once delivery succeeded.
 *
 * Every call does its bookkeeping synchronously when it is made (a write goes
 * to the page cache, a pop reads, a commit moves the head), so concurrent
 * callers see the order of their calls, as the Go spool's mutex gives; only
 * the fdatasyncs are awaited, on the thread pool, and concurrent appends and
 * syncs share them (group commit).
 *
 * A failed fdatasync rolls every segment back to its last durable size and
 * reopens the descriptor (a retried fsync on the same one could claim
 * durability it does not have); the head is clamped with it, the appends
 * waiting on it reject, and an `appendNoSync` group caught in it makes the
 * next `sync()` reject with `GroupLostError`.
 */
import { resolve as resolvePath } from 'node:path';
import { nodeFileSystem, type FileSystem } from '../storage/fs.js';
import type { DirectoryLock } from '../storage/lock.js';
import { asIOError, type CorruptReason } from '../errors.js';
import { GroupCommit } from '../diskqueue/group-commit.js';
import {
  ClosedError,
  CorruptError,
  ExceedsCapError,
  FerryError,
  FullError,
  GroupLostError,
  InvalidArgumentError,
  IOError,
  RecordTooLargeError,
} from '../errors.js';
import { shown } from '../show-value.js';
import { refuseOtherFormat } from '../storage/format-guard.js';
import { checkFrame, frameLength, writeFrame, FRAME_OVERHEAD, MAX_RECORD_BYTES, SEGMENT_HEADER_SIZE } from './format.js';
import { resolveSpoolOptions, type ResolvedSpoolOptions, type SpoolOptions } from './options.js';
import { CursorFile } from './cursor.js';
import { recover, repairTail, wholeFramesEnd, type RecoveryCounts } from './recovery.js';
import { ShortReadError, SpoolSegment } from './segment.js';
import { Popped } from './popped.js';
import type { SpoolStats } from './stats.js';
import { Wakeup } from './wakeup.js';
import { ConsumerTurns } from './turns.js';
import { WriteBehind } from './write-behind.js';

/** `" (ENOSPC)"` for a system error's code, or nothing. */
function causeText(cause: unknown): string {
  const code = (cause as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' ? ` (${code})` : '';
}

/** Largest frame built in the reusable buffer. */
const SCRATCH_MAX = 1 << 20;

/** A flush failure, remembering whether it cost an `appendNoSync` group. */
class FlushFailure extends IOError {
  constructor(
    err: unknown,
    readonly groupLost: boolean,
  ) {
    super(`spool fdatasync failed; unsynced records were rolled back: ${(err as Error)?.message ?? err}`, {
      cause: err instanceof FerryError ? err.cause : err,
    });
    // Callers see an IOError; this subclass only carries `groupLost` inside.
    this.name = 'IOError';
  }
}

/** A durable FIFO byte queue in one directory. Create with {@link Spool.open}. */
export class Spool implements AsyncDisposable {
  private readonly fs: FileSystem;
  private readonly flushes: GroupCommit;
  private readonly wake = new Wakeup();
  private readonly counters: RecoveryCounts & { appended: number; popped: number; committed: number; full: number };
  private closed = false;
  private scratch = new Uint8Array(64 * 1024);
  /** The directory sync that makes the last retirement durable. */
  private retired: Promise<void> = Promise.resolve();
  private readonly behind = new WriteBehind(() => this.writeStaged());
  private closing: Promise<void> | undefined;
  private dirDirty = false;
  /** Frames written, and the count the last completed flush covered. */
  private written = 0;
  private durableWritten = 0;
  /** `written` at the last appendNoSync frame. */
  private lastNoSync = 0;
  /** A rollback cost an appendNoSync group that no sync has reported yet. */
  private groupLost = false;
  /** Consumer calls held while a requeue's copy waits for its fdatasync. */
  private readonly turns = new ConsumerTurns();
  /** Requeues whose copy waits for a flush to cover frame number `mark`. */
  private copies: Array<{ mark: number; done(): void; failed(err: unknown): void }> = [];
  /** The failure that cost that group (a write's or an fdatasync's system error), for the report. */
  private groupLostCause: unknown;

  private constructor(
    /** The spool's directory, absolute. */
    readonly dir: string,
    private readonly opts: ResolvedSpoolOptions,
    private readonly lock: DirectoryLock,
    private readonly segs: SpoolSegment[],
    private headOffset: number,
    private nextSeq: number,
    counts: RecoveryCounts,
    private readonly events: FerryError[],
    private readonly cursor: CursorFile,
  ) {
    this.fs = opts.fs;
    this.counters = { ...counts, appended: 0, popped: 0, committed: 0, full: 0 };
    this.flushes = new GroupCommit(() => this.flush());
  }

  /**
   * Opens (creating if needed) the spool in `dir`. Damage is dropped and
   * counted here and reported by later pops, never thrown. Bytes a previous
   * process left in the page cache are fdatasynced before this resolves.
   *
   * @throws LockedError another spool or queue holds the directory (one process per directory).
   * @throws WrongFormatError the directory holds a DiskQueue's segments (`data.NNNNNNNN`); nothing was written.
   * @throws IOError the directory or a segment could not be created, opened or read.
   * @throws InvalidArgumentError an empty `dir`, an option of the wrong type or out of range, or an unknown option key (`{ maxbytes: 100 }` is refused, not ignored).
   */
  static async open(dir: string, options: SpoolOptions = {}): Promise<Spool> {
    if (typeof dir !== 'string' || dir === '') throw new InvalidArgumentError('dir must be a non-empty path');
    const opts = resolveSpoolOptions(options, nodeFileSystem);
    const fs = opts.fs;
    const abs = resolvePath(dir);
    try {
      fs.mkdirp(abs);
    } catch (err) {
      throw asIOError(`cannot create ${abs}`, err);
    }
    const lock = fs.lock(abs);
    let s: Spool | undefined;
    try {
      refuseOtherFormat(fs, abs, 'spool');
      const cursor = new CursorFile(fs, abs, opts.commitSync);
      const rec = recover(fs, abs, cursor.load());
      s = new Spool(abs, opts, lock, rec.segments, rec.headOffset, rec.nextSeq, rec.counts, rec.events, cursor);
      if (s.segs.length === 0) s.addSegment();
      cursor.ensure();
      await s.settleInherited();
      return s;
    } catch (err) {
      if (s) for (const seg of s.segs) seg.close();
      lock.release();
      throw err instanceof FerryError ? err : asIOError(`cannot open the spool in ${abs}`, err);
    }
  }

  // ------------------------------------------------------------ producing

  /**
   * Appends one record and resolves once it is fdatasynced: after that a
   * producer may forget its copy. It is readable by `pop` at once.
   *
   * @throws FullError the backlog would pass `maxBytes`; nothing changed (clears as the consumer commits).
   * @throws ExceedsCapError the record can never fit: `data.length > maxBytes − 12`.
   * @throws RecordTooLargeError `data.length > MAX_RECORD_BYTES`.
   * @throws IOError the write or the fdatasync failed; the record (and everything unsynced) was rolled back.
   * @throws ClosedError the spool was closed.
   */
  async append(data: Uint8Array): Promise<void> {
    this.place(data, false, false);
    await this.durable(false);
  }

  /**
   * Appends one record without waiting for durability: it is readable at
   * once, and reaches the kernel with the rest of its burst in one write (by
   * the end of this event-loop turn, or before the next pop, sync or
   * rotation), but a crash may take it until a later `sync()` resolves. Same
   * errors as {@link append}, minus the fdatasync; a failed write of the
   * burst shows as `GroupLostError` from the next `sync()`.
   */
  async appendNoSync(data: Uint8Array): Promise<void> {
    this.place(data, true, false);
  }

  /**
   * Makes every record appended so far durable with one fdatasync per dirty
   * segment, shared with concurrent callers. Advance an upstream checkpoint
   * only after it resolves.
   *
   * @throws GroupLostError a failed fdatasync rolled back `appendNoSync` records (now, or since the last sync): re-append the group.
   * @throws IOError an fdatasync failed and only synced appends were rolled back (they rejected themselves).
   * @throws ClosedError the spool was closed.
   */
  async sync(): Promise<void> {
    this.checkOpen();
    this.writeStaged();
    await this.durable(true);
  }

  // ------------------------------------------------------------ consuming

  /**
   * The record at the head, without removing it: two pops without a commit
   * return the same record. Resolves undefined when the spool is empty.
   *
   * Damage at the head is stepped past before the error is thrown, so the
   * next pop makes progress (and `signal()` fires).
   *
   * @throws CorruptError the head frame (or the rest of its segment, when the framing is lost) was damaged and dropped; counted in `lostBytes`. Its `reason`: `checksum` (one frame, or the rest of the segment when the lengths after it do not add up), `length` (a length runs past the end of the file), `short` (the file is shorter than what was written to it: cut underneath the spool).
   * @throws IOError the head segment's file vanished (cause `ENOENT`; it was skipped and counted), or a read failed.
   * @throws ClosedError the spool was closed.
   */
  async pop(): Promise<Popped | undefined> {
    this.checkOpen();
    // Direct when nothing is held: a detour through a promise here would
    // cost a commit made right after the pop its share of a cursor fdatasync.
    if (!this.turns.busy) return this.popNow();
    return this.turns.run(() => this.popNow());
  }

  private popNow(): Popped | undefined {
    this.writeStaged();
    const event = this.events.shift();
    if (event) throw event;
    for (;;) {
      const h = this.segs[0];
      if (!h) return undefined; // a rollback removed every segment and none could be created
      if (this.headOffset >= h.size) {
        if (this.segs.length === 1) return undefined;
        this.retireHead();
        continue;
      }
      const at = this.headOffset;
      let frame: Uint8Array;
      try {
        if (h.size - at < FRAME_OVERHEAD) throw this.dropSegment(h, 'short');
        const length = frameLength(h.read(at, FRAME_OVERHEAD));
        if (at + FRAME_OVERHEAD + length > h.size) throw this.dropSegment(h, 'length');
        frame = h.read(at, FRAME_OVERHEAD + length);
      } catch (err) {
        if (err instanceof FerryError) throw err;
        if (err instanceof ShortReadError) throw this.dropSegment(h, 'short');
        if ((err as { code?: string }).code === 'ENOENT') {
          this.dropSegment(h, 'missing');
          throw new IOError(`spool segment ${h.path} is gone; skipped`, { cause: err });
        }
        throw asIOError(`cannot read spool segment ${h.path}`, err);
      }
      const next = at + frame.length;
      const payload = checkFrame(frame);
      if (!payload) {
        // A bad checksum with a framing that still walks to the end of the
        // file costs this frame; otherwise the length itself may be what is
        // damaged, and nothing after it can be trusted.
        let end: number;
        try {
          end = wholeFramesEnd(h, next);
        } catch (err) {
          if (err instanceof ShortReadError) throw this.dropSegment(h, 'short');
          throw asIOError(`cannot read spool segment ${h.path}`, err);
        }
        if (end !== h.size) throw this.dropSegment(h, 'checksum');
        throw this.dropFrame(h, next);
      }
      this.counters.popped++;
      const epoch = h.epoch;
      return new Popped(payload.slice(), () => this.commitAt(h, at, next, epoch), h.seq, at, next, epoch, h);
    }
  }

  /**
   * Up to `max` records from the head, in order, without removing any (beyond
   * the Go spool, for senders that deliver in batches). The first is what
   * {@link pop} returns, with its errors; the rest stop early at the first
   * thing that is not a whole, intact frame, which the head reports when it
   * gets there. Commit them in order: a commit retires its record only when
   * it is at the head, so a commit made before the ones ahead of it does
   * nothing and is not remembered (that record is delivered again).
   *
   * With `after` (a record popped earlier, not yet committed), the batch
   * starts right after it instead of at the head, for a sender that keeps
   * several batches in flight: nothing before it is read again. Such a batch
   * reports no error; it ends early (or is empty) at anything not intact,
   * which the head reports when it gets there. When `after` is no longer
   * ahead of the head (committed, or cut by a rollback) the batch starts at
   * the head, as without it.
   *
   * @throws as {@link pop}, for the first record of a batch from the head only.
   * @throws InvalidArgumentError `max` is not a positive integer, or `after` is not a popped record.
   */
  async popBatch(max: number, maxBytes = Infinity, after?: Popped): Promise<Popped[]> {
    if (!Number.isSafeInteger(max) || max < 1) throw new InvalidArgumentError(`max must be a positive integer, got ${shown(max)}`);
    if (after !== undefined && !(after instanceof Popped)) throw new InvalidArgumentError('after must be a record from pop or popBatch');
    this.checkOpen();
    if (!this.turns.busy) return this.popBatchNow(max, maxBytes, after);
    return this.turns.run(() => this.popBatchNow(max, maxBytes, after));
  }

  private popBatchNow(max: number, maxBytes: number, after: Popped | undefined): Popped[] {
    let i = after ? this.aheadOfHead(after) : -1;
    const out: Popped[] = [];
    let bytes = 0;
    let at: number;
    if (i >= 0) {
      this.writeStaged();
      at = after!.next;
    } else {
      const first = this.popNow();
      if (!first) return [];
      out.push(first);
      bytes = first.data.length;
      i = 0;
      at = first.next;
    }
    while (out.length < max && bytes < maxBytes) {
      let seg = this.segs[i]!;
      if (at >= seg.size) {
        if (i + 1 >= this.segs.length) break;
        this.release(seg);
        seg = this.segs[++i]!;
        at = SEGMENT_HEADER_SIZE;
        if (at >= seg.size) continue;
      }
      let payload: Uint8Array | undefined;
      try {
        if (seg.size - at < FRAME_OVERHEAD) break;
        const length = frameLength(seg.read(at, FRAME_OVERHEAD));
        if (at + FRAME_OVERHEAD + length > seg.size) break;
        payload = checkFrame(seg.read(at, FRAME_OVERHEAD + length));
      } catch {
        break;
      }
      if (!payload) break;
      const next = at + FRAME_OVERHEAD + payload.length;
      const epoch = seg.epoch;
      const held = seg;
      const from = at;
      out.push(new Popped(payload.slice(), () => this.commitAt(held, from, next, epoch), seg.seq, from, next, epoch, held));
      this.counters.popped++;
      bytes += payload.length;
      at = next;
    }
    return out;
  }

  /**
   * The index in `segs` of the segment holding `p` when `p` is still whole
   * and not yet passed by the head (so the records after it are unread by
   * the head); -1 otherwise.
   */
  private aheadOfHead(p: Popped): number {
    const i = this.segs.indexOf(p.segment as SpoolSegment);
    if (i < 0) return -1;
    const seg = this.segs[i]!;
    if (p.next > seg.size || !seg.intactSince(p.epoch, p.next)) return -1;
    if (i === 0 && this.headOffset > p.offset) return -1;
    return i;
  }

  /**
   * Moves a popped record to the back: appends it again (fdatasynced,
   * ignoring the cap, since the commit right after frees as much) and then
   * commits it at the head, so one undeliverable record cannot block the rest.
   * Resolves false without writing when it is the only record queued, or when
   * it is not the head now: already committed (or skipped, or cut by a rollback),
   * or a later record of a {@link popBatch} (commit the ones before it
   * first); a copy then would be a duplicate. Not atomic: a crash between the
   * two steps delivers it twice.
   *
   * Concurrent calls see it as one step: a `pop`, `popBatch`, commit or
   * `requeue` made while the copy's fdatasync runs waits for it, and then
   * finds the record moved (or, when the requeue failed, still at the head).
   * Appends and syncs do not wait.
   *
   * @throws IOError the append failed; the record stays at the head.
   * @throws ClosedError the spool was closed.
   */
  async requeue(popped: Popped): Promise<boolean> {
    if (!(popped instanceof Popped)) throw new InvalidArgumentError('requeue takes what pop returned');
    this.checkOpen();
    return this.turns.run(() => this.requeueNow(popped));
  }

  /** Writes the copy and holds the consumer side until its flush settles. */
  private requeueNow(popped: Popped): Promise<boolean> {
    const h = this.segs[0];
    const atHead = !!h && h.seq === popped.seq && this.headOffset === popped.offset && popped.next <= h.size && h.intactSince(popped.epoch, popped.next);
    if (!atHead) return Promise.resolve(false);
    if (this.segs.length === 1 && popped.next === h.size) return Promise.resolve(false);
    this.place(popped.data, false, true);
    this.turns.hold();
    let cursor: Promise<void> = Promise.resolve();
    const moved = new Promise<void>((resolve, reject) => {
      this.copies.push({
        mark: this.written,
        // Called inside the flush that made the copy durable, before anything
        // else runs, so the calls held behind it see the head moved.
        done: () => {
          cursor = this.commitNow(h, popped.offset, popped.next, popped.epoch);
          this.turns.release();
          resolve();
        },
        failed: (err) => {
          this.turns.release();
          reject(err);
        },
      });
    });
    // The copy's outcome arrives through `copies`; this only starts the flush.
    this.durable(false).catch(() => {});
    return moved.then(
      () => cursor.then(() => true),
      (err: unknown) => {
        throw err instanceof FerryError ? err : asIOError('spool fdatasync failed', err);
      },
    );
  }

  /**
   * Resolves on the next append or advance past damage; one wake-up that
   * found nobody waiting is kept for the next call, like a one-slot channel,
   * so "pop found nothing, then wait" cannot miss an append in between.
   *
   * @throws ClosedError the spool closed; the signal's reason when it aborts.
   */
  signal(opts: { signal?: AbortSignal } = {}): Promise<void> {
    return this.wake.wait(opts.signal);
  }

  // ------------------------------------------------------------ observing

  /** Undelivered bytes: every segment's bytes minus what the head consumed. `maxBytes` caps this. */
  get bytes(): number {
    if (this.segs.length === 0) return 0;
    let n = -this.headOffset;
    for (const s of this.segs) n += s.size;
    return n;
  }

  /** The configured cap in bytes; 0 when unbounded. */
  get cap(): number {
    return Number.isFinite(this.opts.maxBytes) ? this.opts.maxBytes : 0;
  }

  /** Segment files on disk. */
  get segments(): number {
    return this.segs.length;
  }

  /** Bytes cut off a torn or damaged tail, at open or after a rollback. */
  get discarded(): number {
    return this.counters.discarded;
  }

  /** The last failure to persist the cursor, until one succeeds; commits still advance in memory. */
  get cursorError(): FerryError | undefined {
    return this.cursor.error;
  }

  /** A snapshot of gauges and counters since open. */
  stats(): SpoolStats {
    const c = this.counters;
    let disk = 0;
    let unsynced = 0;
    for (const s of this.segs) {
      disk += s.size;
      unsynced += Math.max(0, s.size - s.durable);
    }
    return {
      backlogBytes: this.bytes,
      maxBytes: this.cap,
      diskBytes: disk,
      segments: this.segs.length,
      unsyncedBytes: unsynced,
      appended: c.appended,
      popped: c.popped,
      committed: c.committed,
      full: c.full,
      lostBytes: c.lostBytes,
      lostSegments: c.lostSegments,
      foreignSegments: c.foreignSegments,
      foreignBytes: c.foreignBytes,
      cursorErrors: this.cursor.failures,
      discardedBytes: c.discarded,
    };
  }

  // ------------------------------------------------------------ closing

  /**
   * Syncs any open group, then releases the files and the directory lock.
   * Queued records stay. Idempotent; commits from earlier pops become no-ops.
   *
   * @throws GroupLostError / IOError the open group could not be made durable (the spool is closed anyway).
   */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  private async shutdown(): Promise<void> {
    this.closed = true;
    this.writeStaged();
    let failure: unknown;
    try {
      if (this.groupLost || this.stats().unsyncedBytes > 0) await this.durable(true);
    } catch (err) {
      failure = err;
    }
    await this.flushes.settled();
    // A requeue made before close finishes (or fails) with its flush; the
    // calls held behind it were made before close too, and run.
    await this.turns.idle();
    await this.flushes.settled();
    await this.retired;
    this.writeStaged();
    this.behind.stop();
    for (const s of this.segs) s.close();
    await this.cursor.close();
    this.lock.release();
    this.wake.close(() => new ClosedError('spool is closed'));
    if (failure) throw failure;
  }

  // ------------------------------------------------------------ internals

  /**
   * Bytes and names a previous process left in the page cache are not known
   * to be durable, yet this spool will deliver them: fdatasync everything
   * once, before reporting `unsyncedBytes` 0. A failure fails the open; it
   * never deletes what is there.
   */
  private async settleInherited(): Promise<void> {
    try {
      for (const s of this.segs) {
        await s.datasync();
        // Only the tail keeps its descriptor, as in recovery.ts.
        if (s !== this.segs[this.segs.length - 1]) s.close();
      }
      await this.fs.syncDir(this.dir);
    } catch (err) {
      throw asIOError(`cannot sync the spool in ${this.dir}`, err);
    }
    for (const s of this.segs) s.durable = s.size;
  }

  private checkOpen(): void {
    if (this.closed) throw new ClosedError('spool is closed');
  }

  /**
   * Checks, rotates and writes one frame, synchronously. `ignoreCap` marks a
   * requeue's copy: that requeue was made before close (it checked then), so
   * it is written even when a close has begun since it was held back.
   */
  private place(data: Uint8Array, noSync: boolean, ignoreCap: boolean): void {
    if (!ignoreCap) this.checkOpen();
    if (!(data instanceof Uint8Array)) throw new InvalidArgumentError('a record must be a Uint8Array');
    if (data.length > MAX_RECORD_BYTES) throw new RecordTooLargeError(`record of ${data.length} bytes exceeds MAX_RECORD_BYTES`);
    const size = FRAME_OVERHEAD + data.length;
    if (this.segs.length === 0) this.addSegment();
    let tail = this.segs[this.segs.length - 1]!;
    const rotate = tail.sealed || (tail.size > SEGMENT_HEADER_SIZE && tail.size + size > this.opts.segmentBytes);
    const headAtTailEnd = this.segs.length === 1 && this.headOffset >= tail.size;
    if (!ignoreCap) {
      const max = this.opts.maxBytes;
      if (size > max) {
        this.counters.full++;
        throw new ExceedsCapError(`record of ${data.length} bytes can never fit under maxBytes ${max}`);
      }
      if (this.bytes + size + (rotate && !headAtTailEnd ? SEGMENT_HEADER_SIZE : 0) > max) {
        this.counters.full++;
        throw new FullError(`spool backlog would pass maxBytes ${max}`);
      }
    }
    if (rotate) {
      this.writeStaged();
      const sealed = tail;
      tail = this.addSegment();
      if (headAtTailEnd) this.retireHead();
      else this.release(sealed);
    }
    let room = noSync ? this.behind.reserve(tail, tail.size, size) : undefined;
    if (!room) {
      // Staged frames go first; a failure there cuts them and moves the end.
      this.writeStaged();
      if (noSync) room = this.behind.reserve(tail, tail.size, size);
    }
    const at = tail.size;
    if (room) {
      writeFrame(data, room);
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
        this.undoWrite(tail, at);
        throw asIOError(`cannot write to spool segment ${tail.path}`, err);
      }
    }
    tail.size = at + size;
    this.written++;
    if (noSync) this.lastNoSync = this.written;
    this.counters.appended++;
    this.wake.fire();
  }

  /**
   * Writes the frames `appendNoSync` staged. They were accepted already, so a
   * failure here cannot reject anybody: it cuts them off again and the next
   * `sync()` reports the group lost.
   */
  private writeStaged(): void {
    const st = this.behind.take();
    if (!st) return;
    try {
      st.seg.file().pwrite(st.bytes, st.at, 'record');
    } catch (err) {
      this.undoWrite(st.seg, st.at);
      st.seg.size = st.at;
      this.groupLost = true;
      this.groupLostCause ??= err;
    }
  }

  /** A failed write may have left part of a frame: cut it, or seal the segment when even that fails. */
  private undoWrite(seg: SpoolSegment, at: number): void {
    try {
      seg.truncate(at);
    } catch {
      seg.sealed = true;
    }
  }

  /** Creates the next segment and makes it the tail. */
  private addSegment(): SpoolSegment {
    const seg = SpoolSegment.create(this.fs, this.dir, this.nextSeq);
    this.nextSeq++;
    this.segs.push(seg);
    this.dirDirty = true;
    return seg;
  }

  /** Deletes the head segment (fully consumed, not the tail) and moves the head to the next one. */
  private retireHead(): void {
    const h = this.segs.shift()!;
    h.retired = true;
    h.close();
    try {
      this.fs.unlink(h.path);
    } catch {
      // left behind, it is older than the cursor and is removed at the next open
    }
    this.headOffset = SEGMENT_HEADER_SIZE;
    // A retired segment that a power cut brings back, beside a cursor that
    // was never synced, would be delivered again whole; syncing the removal
    // keeps a stale cursor's cost to the segment it points into.
    this.retired = this.fs.syncDir(this.dir).catch(() => {});
  }

  /** Waits for a flush covering everything written so far; maps its failure for the caller. */
  private async durable(forSync: boolean): Promise<void> {
    if (forSync && this.groupLost) {
      this.groupLost = false;
      const cause = this.groupLostCause;
      this.groupLostCause = undefined;
      throw new GroupLostError(`appendNoSync records were rolled back by a failed write or fdatasync${causeText(cause)}; re-append the group`, { cause });
    }
    if (this.written === this.durableWritten && !this.dirDirty && this.stats().unsyncedBytes === 0) return;
    try {
      await this.flushes.request();
    } catch (err) {
      if (forSync && (this.groupLost || (err instanceof FlushFailure && err.groupLost))) {
        this.groupLost = false;
        const cause = this.groupLostCause ?? (err as FerryError).cause;
        this.groupLostCause = undefined;
        throw new GroupLostError(`appendNoSync records were rolled back by a failed write or fdatasync${causeText(cause)}; re-append the group`, { cause });
      }
      throw err;
    }
  }

  /** One flush: fdatasync each segment with unsynced bytes, then the directory when names changed. */
  private async flush(): Promise<void> {
    this.writeStaged();
    const covered = this.written;
    const snap = this.segs.filter((s) => s.size > s.durable).map((s) => ({ s, size: s.size }));
    const dir = this.dirDirty;
    this.dirDirty = false;
    try {
      // A commit may retire a listed segment while an earlier one syncs (or
      // during its own fdatasync): its records are all committed, so it
      // needs no sync, and its failure costs nothing still queued.
      for (const { s } of snap) {
        if (s.retired) continue;
        try {
          await s.datasync();
        } catch (err) {
          if (!s.retired) throw err;
        }
        this.release(s);
      }
      if (dir) await this.fs.syncDir(this.dir);
    } catch (err) {
      if (dir) this.dirDirty = true;
      const lost = this.rollback();
      if (lost) this.groupLostCause ??= err instanceof FerryError ? err.cause : err;
      const failure = new FlushFailure(err, lost);
      this.flushes.failWaiting(failure);
      // The rollback cut every unsynced frame, requeue copies included.
      for (const c of this.copies.splice(0)) c.failed(failure);
      throw failure;
    }
    for (const { s, size } of snap) s.durable = Math.max(s.durable, size);
    this.durableWritten = Math.max(this.durableWritten, covered);
    while (this.copies.length > 0 && this.copies[0]!.mark <= this.durableWritten) this.copies.shift()!.done();
  }

  /**
   * Closes the descriptor of a segment that is neither the head nor the tail
   * (after its fdatasync, when one is running): only those two are used
   * often, and a descriptor per queued segment runs a large backlog into
   * EMFILE. The next read or flush opens it again. Closing one whose bytes
   * are not synced yet loses nothing: the page cache belongs to the file,
   * and Linux (4.16 on) reports a write-back error nobody has seen to the
   * next fdatasync on any descriptor. What must never be synced again is a
   * descriptor whose fdatasync failed, and a rollback drops those.
   */
  private release(s: SpoolSegment): void {
    if (s.retired || s === this.segs[0] || s === this.segs[this.segs.length - 1]) return;
    s.close();
  }

  /**
   * Cuts every segment back to its last durable size, on a fresh descriptor,
   * and clamps the head. Returns whether an appendNoSync group was caught.
   */
  private rollback(): boolean {
    // Staged frames lie past the cut and go with it.
    this.behind.take();
    for (let i = this.segs.length - 1; i >= 0; i--) {
      const s = this.segs[i]!;
      if (s.size <= s.durable && s.durable > 0) continue;
      s.reopen();
      if (s.durable === 0) {
        // Created since the last flush: its name was never durable either.
        s.retired = true;
        s.close();
        try {
          this.fs.unlink(s.path);
        } catch {
          // an unsynced name may vanish by itself; if not, the header-only file holds no records
        }
        this.segs.splice(i, 1);
        this.dirDirty = true;
        continue;
      }
      try {
        s.truncate(s.durable);
        s.size = s.durable;
        this.counters.discarded += repairTail(s);
      } catch {
        s.size = s.durable;
        s.sealed = true;
      }
      // Only what lies past the cut is gone: a record handed out before it
      // that ends below it is still the same record at the same place.
      s.cutTo(s.size);
    }
    if (this.segs.length === 0) {
      this.headOffset = SEGMENT_HEADER_SIZE;
      try {
        this.addSegment();
      } catch {
        // nothing to append to now; the next append tries again
      }
    } else if (this.headOffset > this.segs[0]!.size) {
      // The stored cursor may point past the cut; new frames will fill that
      // space, so it must not be left there.
      this.headOffset = this.segs[0]!.size;
      void this.cursor.write({ seq: this.segs[0]!.seq, offset: this.headOffset });
    }
    const lost = this.lastNoSync > this.durableWritten;
    this.written = this.durableWritten;
    this.lastNoSync = Math.min(this.lastNoSync, this.durableWritten);
    if (lost) this.groupLost = true;
    return lost;
  }

  /**
   * Retires the frame at `at` if it is still the head. A rollback since the
   * pop that cut this frame may have put another record at the same
   * position, so a commit of a cut frame is a no-op (the record it meant is
   * gone). A frame that ends below every cut since is the same record and
   * is retired as usual.
   */
  private commitAt(seg: SpoolSegment, at: number, next: number, epoch: number): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (!this.turns.busy) return this.commitNow(seg, at, next, epoch);
    return this.turns.run(() => this.commitNow(seg, at, next, epoch));
  }

  private commitNow(seg: SpoolSegment, at: number, next: number, epoch: number): Promise<void> {
    if (!this.moveHead(seg, at, next, epoch)) return Promise.resolve();
    return this.advanced();
  }

  /**
   * Moves the head past the frame at `at` when it is still the head (see
   * {@link commitAt}), retiring a segment it leaves behind; the cursor is
   * not written. Whether it moved.
   */
  private moveHead(seg: SpoolSegment, at: number, next: number, epoch: number): boolean {
    if (this.segs[0] !== seg || this.headOffset !== at || next > seg.size || !seg.intactSince(epoch, next)) return false;
    this.headOffset = next;
    this.counters.committed++;
    this.retireConsumed();
    return true;
  }

  /**
   * Commits `popped` in order with one cursor write for all of them (beyond
   * the Go spool, for senders that deliver in batches): the same as calling
   * each one's `commit()` in turn, where each retires its record only when it
   * is at the head by then, except that the cursor is written once, after the
   * last. A killed process therefore redelivers either none of the batch or
   * all of what the cursor did not cover, never loses one. Resolves once the
   * cursor was written (and, under `commitSync`, fdatasynced); like
   * `commit()`, a cursor that cannot be written does not reject, it shows in
   * {@link cursorError}. A no-op after close.
   *
   * @throws InvalidArgumentError `popped` is not an array of records popped from a spool.
   */
  commitBatch(popped: readonly Popped[]): Promise<void> {
    if (!Array.isArray(popped) || !popped.every((p) => p instanceof Popped)) {
      return Promise.reject(new InvalidArgumentError('commitBatch takes an array of records from pop or popBatch'));
    }
    if (this.closed) return Promise.resolve();
    if (!this.turns.busy) return this.commitBatchNow(popped);
    return this.turns.run(() => this.commitBatchNow(popped));
  }

  private commitBatchNow(popped: readonly Popped[]): Promise<void> {
    let moved = false;
    for (const p of popped) {
      if (this.moveHead(p.segment as SpoolSegment, p.offset, p.next, p.epoch)) moved = true;
    }
    return moved ? this.advanced() : Promise.resolve();
  }

  /** Retires head segments the head has moved past (never the tail). */
  private retireConsumed(): void {
    while (this.segs.length > 1 && this.headOffset >= this.segs[0]!.size) this.retireHead();
  }

  /** The head moved: retire consumed segments and write the cursor. */
  private advanced(): Promise<void> {
    this.retireConsumed();
    return this.cursor.write({ seq: this.segs[0]!.seq, offset: this.headOffset });
  }

  /** Skips the rest of the head segment; returns the error the pop reports. */
  private dropSegment(h: SpoolSegment, reason: CorruptReason): CorruptError {
    const at = this.headOffset;
    const lost = h.size - at;
    this.counters.lostBytes += lost;
    this.counters.lostSegments++;
    this.headOffset = h.size;
    if (h === this.segs[this.segs.length - 1]) h.sealed = true;
    void this.advanced();
    this.wake.fire();
    return new CorruptError({ segment: h.seq, position: at, reason, lostBytes: lost });
  }

  /** Skips one damaged frame ending at `next`; returns the error the pop reports. */
  private dropFrame(h: SpoolSegment, next: number): CorruptError {
    const at = this.headOffset;
    this.counters.lostBytes += next - at;
    this.headOffset = next;
    void this.advanced();
    this.wake.fire();
    return new CorruptError({ segment: h.seq, position: at, reason: 'checksum', lostBytes: next - at, lostRecords: 1 });
  }
}
