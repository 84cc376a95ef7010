/**
 * DiskQueue: a typed, durable FIFO queue on a directory of segment files, the
 * Go diskqueue's format (github.com/JohanLindvall/diskqueue). Writes go straight to the page cache from
 * the event loop; every fdatasync runs on the thread pool.
 *
 * Durability (the Go diskqueue, "Durability"): under the per-op policy an add writes
 * its record, joins a group commit (data fdatasync, header write, header
 * fdatasync) and resolves once durable; concurrent adds share the fsyncs.
 * Under batched policies an add writes record and header and resolves at once,
 * and a flush runs every `syncEvery` operations, on a timer, on `sync()`, and
 * on `close()`. Either way an add resolves only after its bytes reached the
 * kernel, so a killed process never loses a resolved add.
 *
 * A failed fdatasync latches the queue: Linux reports a write-back error once
 * and may then drop the pages, so a retry could claim durability it does not
 * have. Every later add, commit and sync rejects with `IOError` (cause: the
 * original error); reads, stats and close keep working.
 */
import { resolve as resolvePath } from 'node:path';
import { nodeFileSystem } from '../storage/fs.js';
import { refuseOtherFormat } from '../storage/format-guard.js';
import type { DirectoryLock } from '../storage/lock.js';
import {
  ClosedError,
  CodecError,
  CorruptError,
  FerryError,
  FullError,
  InvalidArgumentError,
} from '../errors.js';
import { codecs, type Codec } from './codecs.js';
import { checkCallOptions, checkIterable, resolveOptions, type DiskQueueOptions, type ResolvedOptions } from './options.js';
import { STAMP_SIZE } from './format.js';
import { Segment } from './segment.js';
import { recover, type RecoveryCounts } from './recovery.js';
import { asIOError } from '../errors.js';
import { Flusher } from './flusher.js';
import { AckLedger, type LedgerEntry } from './ledger.js';
import { ReadCursor } from './read-cursor.js';
import { Reader } from './reader.js';
import type { DiskQueueStats } from './stats.js';
import { Waiters } from '../storage/waiters.js';
import { Appender } from './appender.js';
import { HandlePool } from './handle-pool.js';


const DONE: Promise<void> = Promise.resolve();

/** A durable FIFO queue of `T` in one directory. Create with {@link DiskQueue.open}. */
export class DiskQueue<T = Uint8Array> implements AsyncDisposable {
  /** @internal */ readonly opts: ResolvedOptions<T>;
  /** @internal */ readonly segments: Segment[];
  /** @internal */ readonly ledger = new AckLedger();
  /** @internal */ readonly cursor: ReadCursor;
  /** @internal */ readonly published = new Waiters();
  /** @internal */ readonly freed = new Waiters();
  /** @internal */ readonly counters: RecoveryCounts & { added: number; delivered: number; committed: number; rejectedFull: number };
  /** @internal */ readonly appender: Appender;

  private readonly flusher: Flusher;
  private closed = false;
  /** The first `close()`'s run, which every call returns. */
  private closing: Promise<void> | undefined;
  private commitMoved = false;
  private timer: NodeJS.Timeout | undefined;
  /** Fully committed segments taken out of the queue whose unlink failed; retried on each reclaim. */
  private unreclaimed: Segment[] = [];
  /** Unlinks under way on the thread pool (`FileSystem.unlinkAsync`); every flush and close wait for them. They never reject. */
  private readonly unlinking = new Set<Promise<void>>();
  private pool: HandlePool | undefined;

  private constructor(
    readonly dir: string,
    opts: ResolvedOptions<T>,
    private readonly lock: DirectoryLock,
    segments: Segment[],
    counts: RecoveryCounts,
    events: CorruptError[],
  ) {
    this.opts = opts;
    this.segments = segments;
    this.counters = { ...counts, added: 0, delivered: 0, committed: 0, rejectedFull: 0 };
    this.cursor = new ReadCursor(this, events);
    if (opts.maxOpenFiles > 0) {
      this.pool = new HandlePool(opts.maxOpenFiles);
      for (const s of segments) this.adopt(s);
    }
    this.flusher = new Flusher(opts.fs, {
      dir,
      segments,
      published: () => this.published.wakeAll(),
      rolledBack: (n) => (this.counters.added -= n),
      maxOpenFiles: opts.maxOpenFiles,
      unlinked: () => this.unlinked(),
      leaving: () => this.leaving(),
    });
    this.appender = new Appender(this, this.flusher);
    if (!opts.perOp && opts.syncIntervalMs > 0) {
      this.timer = setInterval(() => {
        if (this.flusher.unsyncedBytes > 0 || this.flusher.unsyncedOps > 0) this.flusher.request().catch(() => {});
      }, opts.syncIntervalMs);
      this.timer.unref();
    }
  }

  /**
   * Opens (creating if needed) the queue in `dir`. Reads one header per
   * segment and no records; damage is repaired or dropped and reported later,
   * never thrown here.
   *
   * @throws LockedError another queue holds the directory.
   * @throws SegmentSizeMismatchError the directory was created with another `segmentSize`.
   * @throws WrongFormatError the directory holds a spool's files (`cursor`, `NNN….seg`); nothing was written.
   * @throws IOError a segment could not be opened or read (nothing was deleted).
   * @throws InvalidArgumentError an empty `dir`, or an option of the wrong type or out of range.
   */
  static async open<T = Uint8Array>(dir: string, options: DiskQueueOptions<T> = {}): Promise<DiskQueue<T>> {
    if (typeof dir !== 'string' || dir === '') throw new InvalidArgumentError('dir must be a non-empty path');
    const opts = resolveOptions(options, codecs.bytes as unknown as Codec<T>, nodeFileSystem);
    const fs = opts.fs;
    const abs = resolvePath(dir);
    try {
      fs.mkdirp(abs, opts.dirMode);
    } catch (err) {
      throw asIOError(`cannot create ${abs}`, err);
    }
    const lock = fs.lock(abs);
    let q: DiskQueue<T> | undefined;
    try {
      refuseOtherFormat(fs, abs, 'diskqueue');
      const rec = recover(fs, abs, opts.segmentSize);
      q = new DiskQueue<T>(abs, opts, lock, rec.segments, rec.counts, rec.events);
      q.appender.highestSeq = rec.highestSeq;
      // The numbers of dropped segments stay used: when the newest were
      // dropped, the next segment is created before they are removed, so no
      // later open can hand their numbers out again.
      if (rec.droppedAbove) q.appender.roll(opts.segmentSize, false);
      for (const path of rec.doomed) {
        try {
          fs.unlink(path);
        } catch (err) {
          if ((err as NodeJS.ErrnoException)?.code !== 'ENOENT') throw asIOError(`cannot remove ${path}`, err);
        }
      }
      q.reclaim();
      // Bytes and names a previous process left in the page cache (a batched
      // policy, or a kill between write and flush) are not known to be
      // durable, yet this queue will deliver them and report unsyncedBytes 0:
      // flush them before saying so. On a clean file an fdatasync is cheap.
      for (const s of q.segments) s.dataDirty = true;
      q.flusher.dirDirty = true;
      await q.flusher.request();
      return q;
    } catch (err) {
      if (q) {
        clearInterval(q.timer);
        for (const s of q.segments) s.closeHandle();
      }
      lock.release();
      throw err;
    }
  }

  // ---------------------------------------------------------------- adding

  /**
   * Appends one value. Resolves once the record is durable under the per-op
   * policy, or once its bytes reached the kernel under a batched one.
   *
   * @throws FullError a segment or byte cap is reached; nothing changed.
   * @throws RecordTooLargeError the record is larger than `maxBytes`.
   * @throws CodecError the codec refused the value.
   * @throws IOError a write or flush failed (after a failed fdatasync the queue is latched).
   * @throws ClosedError the queue was closed.
   */
  add(value: T): Promise<void> {
    try {
      this.checkWritable();
      this.appender.placeOne(this.encode(value), false);
      return this.persist(1) ?? DONE;
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * Like {@link add}, but when the queue is full it waits for a commit to free
   * space and tries again. `RecordTooLargeError` still rejects at once.
   *
   * @throws ClosedError the queue closed while waiting; the abort reason when `signal` aborts.
   */
  async addWait(value: T, opts: { signal?: AbortSignal } = {}): Promise<void> {
    this.checkWritable();
    checkCallOptions(opts);
    const payload = this.encode(value);
    for (;;) {
      opts.signal?.throwIfAborted();
      try {
        this.appender.placeOne(payload, false);
        break;
      } catch (err) {
        if (!(err instanceof FullError)) throw err;
      }
      await this.freed.wait(opts.signal, () => this.closedError());
      this.checkWritable();
    }
    await this.persist(1);
  }

  /**
   * Appends values in order with one flush for all of them; resolves to the
   * number placed (all of them). When it stops early it rejects with the error,
   * whose `placed` tells how many leading values were placed, each durable.
   *
   * @throws InvalidArgumentError `values` is not iterable.
   */
  async addBatch(values: Iterable<T>): Promise<number> {
    this.checkWritable();
    checkIterable('values', values);
    const payloads: Uint8Array[] = [];
    let stop: unknown;
    try {
      for (const v of values) payloads.push(this.encode(v));
    } catch (err) {
      stop = err;
    }
    const res = this.appender.placeAll(payloads, false);
    let placed = res.placed;
    stop = res.error ?? stop;
    if (placed > 0) {
      try {
        await this.persist(placed);
      } catch (err) {
        stop = err;
        placed = 0;
      }
    }
    if (stop !== undefined) {
      if (stop instanceof FerryError) stop.placed = placed;
      throw stop;
    }
    return placed;
  }

  /** @internal Encodes a value into its payload (stamp included). */
  encode(value: T): Uint8Array {
    let body: Uint8Array;
    try {
      body = this.opts.codec.encode(value);
    } catch (err) {
      throw err instanceof CodecError ? err : new CodecError(`codec refused the value: ${(err as Error)?.message ?? err}`, { cause: err });
    }
    if (!(body instanceof Uint8Array)) throw new CodecError('codec.encode must return a Uint8Array');
    if (!this.opts.stampRecords) return body;
    const out = new Uint8Array(STAMP_SIZE + body.length);
    new DataView(out.buffer).setBigUint64(0, BigInt(Date.now()) * 1_000_000n, false);
    out.set(body, STAMP_SIZE);
    return out;
  }

  /** @internal Puts `seg`'s descriptor under the `maxOpenFiles` bound. */
  adopt(seg: Segment): void {
    if (!this.pool) return;
    seg.pool = this.pool;
    if (seg.fh) this.pool.use(seg);
  }

  /**
   * @internal What `ops` writes or commits just done still need before they
   * may resolve: a flush to wait for (per-op policy, or a `syncEvery`
   * boundary crossed), or nothing. Synchronous, so a read path that needs no
   * flush settles without a promise of its own.
   */
  persist(ops: number): Promise<void> | undefined {
    if (this.opts.perOp) return this.flusher.request();
    this.flusher.unsyncedOps += ops;
    if (this.opts.syncEvery > 1 && this.flusher.unsyncedOps >= this.opts.syncEvery) return this.flusher.request();
    return undefined;
  }

  // ------------------------------------------------------------- consuming

  /** A new reader. Readers share one read cursor: each record goes to one of them. */
  reader(): Reader<T> {
    this.checkOpen();
    return new Reader(this);
  }

  /**
   * Returns every reserved but uncommitted record to the queue, as a reopen
   * would. Never un-commits.
   */
  async rewind(): Promise<void> {
    this.checkOpen();
    this.cursor.rewind();
    this.published.wakeAll();
  }

  /**
   * @internal Moves the commit cursor across the ledger's done prefix,
   * reclaims, wakes `addWait`, and under batched policies writes the headers.
   * Returns whether the commit cursor moved (and so needs a flush, see
   * {@link persist}, to be durable). After close it does nothing: the files
   * and the lock are gone, and an unpersisted commit replays, never loses.
   */
  settleCommits(): boolean {
    if (this.closed) return false;
    if (this.ledger.size > 0) this.ledger.takeDone(this.commitEntry);
    if (!this.commitMoved) return false;
    this.commitMoved = false;
    // A latched queue persists nothing more, and removes no file either: a
    // segment whose commits never reached its header stays for the next open.
    if (!this.flusher.latched && (this.unreclaimed.length > 0 || (this.segments.length > 1 && this.segments[0]!.retired))) this.reclaim();
    this.freed.wakeAll();
    if (this.flusher.latched) throw this.flusher.latchedError();
    if (!this.opts.perOp) this.writeCommitHeaders();
    return true;
  }

  private readonly commitEntry = (e: LedgerEntry): void => this.commitDirect(e.seg, e.end, e.records);

  /** @internal Moves `seg`'s commit cursor to `end` across `records` records; {@link settleCommits} finishes the move. */
  commitDirect(seg: Segment, end: number, records: number): void {
    seg.commitCursor = end;
    seg.committedCount += records;
    seg.headerDirty = true;
    this.counters.committed += records;
    this.commitMoved = true;
  }

  /**
   * Under batched policies a commit writes its header before it resolves, so a
   * killed process never loses a commit that resolved (as it never loses an
   * add that resolved). A failed write leaves the header dirty for the next
   * flush and is reported as the commit's failure.
   */
  private writeCommitHeaders(): void {
    try {
      this.flusher.writeDirtyHeaders();
    } catch (err) {
      throw asIOError('commit header write failed', err);
    }
  }

  /**
   * Unlinks whole segments whose every record is committed. Where the file
   * system can, the unlink runs on the thread pool: freeing a page-cached
   * segment's pages would otherwise hold the event loop for milliseconds per
   * segment. Headers are written only for the segments in the queue, so a
   * leaving segment's last commits are written into its header first: a
   * crash before the unlink runs then brings back a file the next open sees
   * as consumed and reclaims, never one whose acked records come back. A
   * flush waits for the unlinks under way before it syncs the directory, so
   * under the per-operation policy the commit that emptied a segment resolves
   * once the removal is durable, as with a synchronous unlink.
   */
  private reclaim(): void {
    const fs = this.opts.fs;
    while (this.segments.length > 1 && this.segments[0]!.retired) {
      const seg = this.segments.shift()!;
      this.cursor.forget(seg);
      seg.reclaimed = true;
      if (seg.headerDirty) {
        // While the file stays (its unlink fails), the next flush makes this
        // header durable, and writes it first if it could not be written here.
        try {
          seg.writeHeader(fs);
        } catch {
          // still dirty: the synchronous unlink below removes the file, or the flush writes it again and fails the commit
        }
      }
      const final = !seg.headerDirty;
      seg.closeHandle();
      this.flusher.dirDirty = true;
      if (final && fs.unlinkAsync !== undefined) this.unlinkLater(seg);
      else this.unreclaimed.push(seg);
    }
    this.unreclaimed = this.unreclaimed.filter((seg) => {
      try {
        fs.unlink(seg.path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException)?.code !== 'ENOENT') return true;
      }
      return false;
    });
  }

  /** Unlinks `seg`'s file off the event loop; a failure leaves it unreclaimed, for the next reclaim to retry. */
  private unlinkLater(seg: Segment): void {
    const done: Promise<void> = this.opts.fs.unlinkAsync!(seg.path)
      .then(
        () => {
          this.flusher.dirDirty = true;
        },
        (err: unknown) => {
          if ((err as NodeJS.ErrnoException)?.code !== 'ENOENT') this.unreclaimed.push(seg);
        },
      )
      .finally(() => this.unlinking.delete(done));
    this.unlinking.add(done);
  }

  /**
   * The segments whose unlink failed and whose last header is not yet written
   * and fdatasynced (their dirty flags say so), for the flusher: while such a
   * file stays, neither a reopen nor a power cut may bring its acked records back.
   */
  private leaving(): Segment[] {
    return this.unreclaimed.filter((seg) => seg.headerDirty || seg.dataDirty);
  }

  /**
   * Resolves once the unlinks under way now have completed. Not the ones
   * started meanwhile: readers that go on emptying segments must not starve
   * a flush (each commit that starts one asks for a flush of its own).
   */
  private async unlinked(): Promise<void> {
    if (this.unlinking.size > 0) await Promise.all([...this.unlinking]);
  }

  // ------------------------------------------------------------- flushing

  /**
   * Makes every write and commit so far durable, and the removal of the
   * segments they emptied, under any policy.
   *
   * @throws IOError the flush failed, or the queue is latched.
   */
  async sync(): Promise<void> {
    this.checkWritable();
    await this.flusher.request();
  }

  // ------------------------------------------------------------ lifecycle

  /**
   * Flushes, closes every file and releases the directory lock. Resolves once
   * closed; rejects with `IOError` when the final flush failed or the queue was
   * latched (it is closed all the same). Idempotent: every call, made while
   * the first runs or after it, returns the first one's outcome (the lock is
   * released when any of them settles).
   */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    this.published.closeAll();
    this.freed.closeAll();
    let failure: unknown;
    await this.flusher.settled();
    // Also when latched (no final flush): the next owner of the directory
    // must not see a file vanish under it. No commit reclaims after close.
    await this.unlinked();
    if (this.flusher.latched) failure = this.flusher.latchedError();
    else {
      try {
        await this.flusher.request();
      } catch (err) {
        failure = err;
      }
    }
    for (const s of this.segments) s.closeHandle();
    this.lock.release();
    if (failure !== undefined) throw asIOError('close: final flush failed', failure);
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** A snapshot of gauges and counters; see {@link DiskQueueStats}. */
  stats(): DiskQueueStats {
    this.checkOpen();
    let backlog = 0;
    let diskBytes = 0;
    for (const s of this.segments) {
      backlog += s.writtenCount - s.committedCount;
      diskBytes += s.diskBytes;
    }
    const c = this.counters;
    return {
      backlog,
      backlogBytes: this.backlogBytes(),
      maxBytes: this.opts.maxBytes,
      inFlightBytes: this.ledger.inFlightBytes,
      unsyncedBytes: this.opts.perOp ? 0 : this.flusher.unsyncedBytes,
      segments: this.segments.length,
      diskBytes,
      added: c.added,
      delivered: c.delivered,
      committed: c.committed,
      corruptions: c.corruptions,
      lostBytes: c.lostBytes,
      lostRecords: c.lostRecords,
      lostSegments: c.lostSegments,
      unreclaimed: this.unreclaimed.length,
      foreignSegments: c.foreignSegments,
      foreignBytes: c.foreignBytes,
      discardedBytes: c.discardedBytes,
      maxSegments: this.opts.maxSegments,
      rejectedFull: c.rejectedFull,
    };
  }

  /** @internal Framed bytes written and not yet committed (pending publication included). */
  backlogBytes(): number {
    let n = 0;
    for (const s of this.segments) n += s.end - s.commitCursor;
    return n;
  }

  /** @internal */
  checkOpen(): void {
    if (this.closed) throw this.closedError();
  }

  /** @internal */
  closedError(): ClosedError {
    return new ClosedError(`queue ${this.dir} is closed`);
  }

  /** @internal Throws when the queue is closed or latched. */
  checkWritable(): void {
    this.checkOpen();
    if (this.flusher.latched) throw this.flusher.latchedError();
  }

}
