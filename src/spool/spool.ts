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
 * This class is the public face and holds the parts together: `appender.ts`
 * places records at the tail, `head.ts` reads, skips damage and commits at
 * the head, `flusher.ts` makes writes durable and rolls back a failed
 * fdatasync (the head is clamped with it), and `turns.ts` holds consumer
 * calls behind a requeue.
 */
import { resolve as resolvePath } from 'node:path';
import { asIOError } from '../errors.js';
import { ClosedError, FerryError, GroupLostError, InvalidArgumentError } from '../errors.js';
import { shown } from '../show-value.js';
import { refuseOtherFormat } from '../storage/format-guard.js';
import { nodeFileSystem, type FileSystem } from '../storage/fs.js';
import type { DirectoryLock } from '../storage/lock.js';
import { WakeSlot } from '../storage/waiters.js';
import { Appender } from './appender.js';
import { CursorFile } from './cursor.js';
import { Flusher } from './flusher.js';
import { Head } from './head.js';
import { SEGMENT_HEADER_SIZE } from './format.js';
import { resolveSpoolOptions, type ResolvedSpoolOptions, type SpoolOptions } from './options.js';
import { Popped } from './popped.js';
import { PoppedRun, checkRun, type RecordRun } from './popped-run.js';
import { recover, type RecoveryCounts } from './recovery.js';
import { SpoolSegment } from './segment.js';
import { WrittenMemory } from './written-memory.js';
import type { SpoolStats } from './stats.js';
import { ConsumerTurns } from './turns.js';

/**
 * Bytes of its own recent `appendNoSync` writes a spool keeps in memory once
 * something in this process pops from it, so a consumer close behind the
 * producer pops them without reading and hashing each frame again. Frames
 * past this (a consumer far behind) are read from the file, as after a
 * restart.
 */
export const WRITTEN_MEMORY_BYTES = 32 << 20;

/** A durable FIFO byte queue in one directory. Create with {@link Spool.open}. */
export class Spool implements AsyncDisposable {
  private readonly fs: FileSystem;
  private readonly flusher: Flusher;
  private readonly wake = new WakeSlot();
  private readonly counters: RecoveryCounts & { appended: number; popped: number; committed: number; full: number };
  private closed = false;
  private readonly appender: Appender;
  private readonly head: Head;
  private closing: Promise<void> | undefined;
  /** Consumer calls held while a requeue's copy waits for its fdatasync. */
  private readonly turns = new ConsumerTurns();
  /** What the segments keep of this process's writes for the head to read from memory (segment.ts, `remember`). */
  private readonly written = new WrittenMemory(WRITTEN_MEMORY_BYTES);

  private constructor(
    /** The spool's directory, absolute. */
    readonly dir: string,
    private readonly opts: ResolvedSpoolOptions,
    private readonly lock: DirectoryLock,
    private readonly segs: SpoolSegment[],
    headOffset: number,
    private nextSeq: number,
    counts: RecoveryCounts,
    events: FerryError[],
    private readonly cursor: CursorFile,
  ) {
    this.fs = opts.fs;
    for (const seg of segs) seg.budget = this.written;
    this.counters = { ...counts, appended: 0, popped: 0, committed: 0, full: 0 };
    this.flusher = new Flusher(this.fs, {
      dir,
      segments: segs,
      writeStaged: () => this.appender.writeStaged(),
      dropStaged: () => this.appender.dropStaged(),
      release: (seg) => this.release(seg),
      rolledBack: (discarded) => this.rolledBack(discarded),
    });
    this.appender = new Appender(
      {
        opts,
        segments: segs,
        counters: this.counters,
        backlogBytes: () => this.bytes,
        headAtTailEnd: () => segs.length === 1 && this.head.offset >= segs[0]!.size,
        addSegment: () => this.addSegment(),
        retireHead: () => this.head.retire(),
        release: (seg) => this.release(seg),
        placed: () => this.wake.fire(),
        written: this.written,
      },
      this.flusher,
    );
    this.head = new Head(
      {
        fs: this.fs,
        dir,
        segments: segs,
        counters: this.counters,
        writeStaged: () => this.appender.writeStaged(),
        release: (seg) => this.release(seg),
        skipped: () => this.wake.fire(),
        commit: (seg, at, next, epoch) => this.commitAt(seg, at, next, epoch),
      },
      headOffset,
      events,
      cursor,
    );
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
      // The only segment, all of it consumed, goes before the next is made:
      // its space comes back now, not once it has filled, which on a disk
      // the spool itself filled is never (and then no room is left for even
      // a new segment's header). A crash in between leaves no segment and
      // the cursor, from which the next open numbers on.
      const reclaim = s.segs.length === 1 && s.segs[0]!.size > SEGMENT_HEADER_SIZE && s.head.offset >= s.segs[0]!.size;
      if (reclaim) {
        s.head.retire();
        await s.head.retired;
      }
      if (s.segs.length === 0) s.addSegment();
      cursor.ensure();
      // The cursor names the new segment (a failure is counted, as a commit's is).
      if (reclaim) await cursor.write({ seq: s.segs[0]!.seq, offset: SEGMENT_HEADER_SIZE });
      // Bytes and names a previous process left in the page cache are not
      // known to be durable, yet this spool will deliver them. A failure
      // fails the open; it never deletes what is there.
      await s.flusher.syncInherited();
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
   * @throws IOError a new segment could not be made (nothing was placed, nothing cut); or the record's write or fdatasync failed (it, and everything unsynced, was rolled back).
   * @throws GroupLostError an `appendNoSync` group was lost since the last `sync()` and no `sync()` has reported it yet: nothing was placed; call `sync()`, which rejects with the loss, then re-append the group and this record.
   * @throws ClosedError the spool was closed.
   */
  async append(data: Uint8Array): Promise<void> {
    this.checkOpen();
    this.appender.place(data, false, false);
    await this.flusher.durable(false);
  }

  /**
   * Appends one record without waiting for durability: it is readable at
   * once, and reaches the kernel with the rest of its burst in one write (by
   * the end of this event-loop turn, or before the next pop, sync or
   * rotation), but a crash may take it until a later `sync()` resolves. Same
   * errors as {@link append}, minus the fdatasync; a failed write of the
   * burst shows as `GroupLostError` from the next `sync()`.
   *
   * @throws GroupLostError the group since the last `sync()` was lost (a failed write or fdatasync) and no `sync()` has reported it yet: nothing was placed; call `sync()`, which rejects with the loss, then re-append the group and this record.
   */
  async appendNoSync(data: Uint8Array): Promise<void> {
    this.checkOpen();
    this.appender.place(data, true, false);
  }

  /**
   * {@link appendNoSync} for each of `records` in order, in one call (beyond
   * the Go spool, for producers that read records in bulk): one promise for
   * the lot instead of one per record. Stops at the first record that cannot
   * be placed; the ones before it are placed (readable, and made durable by
   * the next `sync()`), it and the ones after it are not.
   *
   * @throws FullError, ExceedsCapError, RecordTooLargeError, IOError as {@link append} (for the
   *   first record that could not be placed), with `placed` set to how many leading records were.
   * @throws InvalidArgumentError `records` is not an array, or a record is not a Uint8Array (`placed` as above).
   * @throws GroupLostError as {@link appendNoSync}, with `placed` 0: the lost group may have taken any record this call placed.
   * @throws ClosedError the spool was closed; nothing was placed.
   */
  async appendBatchNoSync(records: readonly Uint8Array[]): Promise<void> {
    if (!Array.isArray(records)) throw new InvalidArgumentError('appendBatchNoSync takes an array of records');
    this.checkOpen();
    let placed = 0;
    try {
      for (; placed < records.length; placed++) this.appender.place(records[placed]!, true, false);
    } catch (err) {
      // A lost group may have taken any of the records this call placed: none counts.
      if (err instanceof FerryError) err.placed = err instanceof GroupLostError ? 0 : placed;
      throw err;
    }
  }

  /**
   * {@link appendBatchNoSync} for records `from` to `to − 1` of `run` (all of
   * them by default), which lie in one buffer: record `k` is
   * `run.bytes[run.starts[k], run.starts[k] + run.lengths[k])` (lines cut
   * from a read, say, with no view made per line). Records placed together
   * in a segment are framed in one go. The same rules as
   * {@link appendBatchNoSync}: it stops at the first record that cannot be
   * placed, the ones before it are placed.
   *
   * @throws InvalidArgumentError `run` is not such a run (`starts` and `lengths` of one length, each record inside `bytes`), or `from`/`to` do not name a range of it: nothing was placed (`placed` 0).
   * @throws FullError, ExceedsCapError, RecordTooLargeError, IOError, GroupLostError, ClosedError as {@link appendBatchNoSync}, with `placed` counted from `from`.
   */
  async appendRunNoSync(run: RecordRun, from = 0, to?: number): Promise<void> {
    const end = checkRun(run, from, to);
    this.checkOpen();
    let k = from;
    try {
      while (k < end) {
        const n = this.appender.stageRun(run.bytes, run.starts, run.lengths, k, end);
        if (n > 0) {
          k += n;
        } else {
          // The checks with something to do (rotation, a full spool, a stage to write first), one record at a time.
          this.appender.place(run.bytes.subarray(run.starts[k]!, run.starts[k]! + run.lengths[k]!), true, false);
          k++;
        }
      }
    } catch (err) {
      // A lost group may have taken any of the records this call placed: none counts.
      if (err instanceof FerryError) err.placed = err instanceof GroupLostError ? 0 : k - from;
      throw err;
    }
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
    this.appender.writeStaged();
    await this.flusher.durable(true);
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
    this.written.consuming = true;
    // Direct when nothing is held: a detour through a promise here would
    // cost a commit made right after the pop its share of a cursor fdatasync.
    if (!this.turns.busy) return this.head.pop();
    return this.turns.run(() => this.head.pop());
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
   * @throws InvalidArgumentError `max` is not a positive integer, `maxBytes` is not a number of bytes (0 or more, or Infinity), or `after` is not a popped record.
   */
  async popBatch(max: number, maxBytes = Infinity, after?: Popped): Promise<Popped[]> {
    if (!Number.isSafeInteger(max) || max < 1) throw new InvalidArgumentError(`max must be a positive integer, got ${shown(max)}`);
    checkMaxBytes(maxBytes);
    if (after !== undefined && !(after instanceof Popped)) throw new InvalidArgumentError('after must be a record from pop or popBatch');
    this.checkOpen();
    this.written.consuming = true;
    if (!this.turns.busy) return this.head.popBatch(max, maxBytes, after);
    return this.turns.run(() => this.head.popBatch(max, maxBytes, after));
  }

  /**
   * {@link popBatch} for a sender that hands records on in bulk: the same
   * records, as one {@link PoppedRun} (their bytes in one copy, with where
   * each starts) rather than an object per record; undefined when there are
   * none. With `after` (an earlier run, not yet committed) the run starts
   * right after it, as `popBatch` does after a record. Commit runs with
   * {@link commitRuns}.
   *
   * @throws as {@link popBatch}.
   * @throws InvalidArgumentError `max` is not a positive integer, `maxBytes` is not a number of bytes (0 or more, or Infinity), or `after` is not a run from `popRun`.
   */
  async popRun(max: number, maxBytes = Infinity, after?: PoppedRun): Promise<PoppedRun | undefined> {
    if (!Number.isSafeInteger(max) || max < 1) throw new InvalidArgumentError(`max must be a positive integer, got ${shown(max)}`);
    checkMaxBytes(maxBytes);
    if (after !== undefined && !(after instanceof PoppedRun)) throw new InvalidArgumentError('after must be a run from popRun');
    this.checkOpen();
    this.written.consuming = true;
    if (!this.turns.busy) return this.head.popRun(max, maxBytes, after?.last);
    return this.turns.run(() => this.head.popRun(max, maxBytes, after?.last));
  }

  /**
   * Commits the records of `runs` in order with one cursor write for all of
   * them: what {@link commitBatch} does for the same records popped one by
   * one, and with the same outcome when the head is elsewhere (a record
   * retires only when it is at the head by then).
   *
   * @throws InvalidArgumentError `runs` is not an array of runs from `popRun`.
   */
  commitRuns(runs: readonly PoppedRun[]): Promise<void> {
    if (!Array.isArray(runs) || !runs.every((r) => r instanceof PoppedRun)) {
      return Promise.reject(new InvalidArgumentError('commitRuns takes an array of runs from popRun'));
    }
    if (this.closed) return Promise.resolve();
    if (!this.turns.busy) return this.head.commitRuns(runs);
    return this.turns.run(() => this.head.commitRuns(runs));
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
    if (!this.turns.busy) return this.head.commitBatch(popped);
    return this.turns.run(() => this.head.commitBatch(popped));
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
    if (!this.head.holds(popped)) return Promise.resolve(false);
    const h = this.segs[0]!;
    if (this.segs.length === 1 && popped.next === h.size) return Promise.resolve(false);
    // Written even when a close has begun since this requeue was held back:
    // it was made before close, and checked then.
    this.appender.place(popped.data, false, true);
    this.turns.hold();
    let cursor: Promise<void> = Promise.resolve();
    const moved = new Promise<void>((resolve, reject) => {
      this.flusher.whenCovered(
        // Called inside the flush that made the copy durable, before anything
        // else runs, so the calls held behind it see the head moved.
        () => {
          cursor = this.head.commit(h, popped.offset, popped.next, popped.epoch);
          this.turns.release();
          resolve();
        },
        (err) => {
          this.turns.release();
          reject(err);
        },
      );
    });
    // The copy's outcome arrives through `whenCovered`; this only starts the flush.
    this.flusher.durable(false).catch(() => {});
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
   * @throws InvalidArgumentError `opts.signal` is given and is not an `AbortSignal`.
   */
  signal(opts: { signal?: AbortSignal } = {}): Promise<void> {
    const signal = opts?.signal;
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      return Promise.reject(new InvalidArgumentError(`signal must be an AbortSignal, got ${shown(signal)}`));
    }
    return this.wake.wait(signal);
  }

  // ------------------------------------------------------------ observing

  /** Undelivered bytes: every segment's bytes minus what the head consumed. `maxBytes` caps this. */
  get bytes(): number {
    if (this.segs.length === 0) return 0;
    let n = -this.head.offset;
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
    for (const s of this.segs) disk += s.size;
    return {
      backlogBytes: this.bytes,
      maxBytes: this.cap,
      diskBytes: disk,
      segments: this.segs.length,
      unsyncedBytes: this.flusher.unsyncedBytes(),
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
    this.appender.writeStaged();
    let failure: unknown;
    try {
      if (this.flusher.owed) await this.flusher.durable(true);
    } catch (err) {
      failure = err;
    }
    await this.flusher.settled();
    // A requeue made before close finishes (or fails) with its flush; the
    // calls held behind it were made before close too, and run.
    await this.turns.idle();
    await this.flusher.settled();
    await this.head.retired;
    this.appender.writeStaged();
    this.appender.stop();
    for (const s of this.segs) {
      s.close();
      s.forgetWritten();
    }
    await this.cursor.close();
    this.lock.release();
    this.wake.close(() => new ClosedError('spool is closed'));
    if (failure) throw failure;
  }

  // ------------------------------------------------------------ internals

  private checkOpen(): void {
    if (this.closed) throw new ClosedError('spool is closed');
  }

  /** Creates the next segment and makes it the tail. */
  private addSegment(): SpoolSegment {
    const seg = SpoolSegment.create(this.fs, this.dir, this.nextSeq);
    seg.budget = this.written;
    this.nextSeq++;
    this.segs.push(seg);
    this.flusher.dirDirty = true;
    return seg;
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

  /** A flush failed and cut the segments back: clamps the head and makes sure there is a tail. */
  private rolledBack(discarded: number): void {
    this.counters.discarded += discarded;
    this.head.clamp();
    if (this.segs.length === 0) {
      try {
        this.addSegment();
      } catch {
        // nothing to append to now; the next append tries again
      }
    }
  }

  /** The commit a popped record carries: retires it if it is still the head (see head.ts), in its turn. */
  private commitAt(segment: object, at: number, next: number, epoch: number): Promise<void> {
    const seg = segment as SpoolSegment;
    if (this.closed) return Promise.resolve();
    if (!this.turns.busy) return this.head.commit(seg, at, next, epoch);
    return this.turns.run(() => this.head.commit(seg, at, next, epoch));
  }
}

/** A batch's `maxBytes`: 0 or more (Infinity for no limit); a batch always holds at least its first record. */
function checkMaxBytes(maxBytes: number): void {
  if (typeof maxBytes !== 'number' || !(maxBytes >= 0)) throw new InvalidArgumentError(`maxBytes must be a number of bytes (0 or more, or Infinity), got ${shown(maxBytes)}`);
}
