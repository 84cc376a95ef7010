/**
 * A consumer of a DiskQueue (seed 000, "Consuming"). Readers of one queue
 * share its read cursor and cooperate: each record goes to one of them.
 *
 * - At most once: `take`, `tryTake`, `drain`, `follow` read and commit in one call.
 * - At least once: `reserve`/`tryReserve` hand out a record and its offset;
 *   `ack(offset)` retires that record alone (safe with competing workers),
 *   `commit(offset)` retires it and everything before it (one consumer).
 *
 * One Reader is not meant to be shared by concurrent consumers: make one each.
 * The bytes a codec decodes are this reader's private copy, valid until its
 * next read.
 */
import { CodecError, CorruptError, InvalidArgumentError, OffsetError } from '../errors.js';
import { STAMP_SIZE } from './format.js';
import { packOffset } from './ledger.js';
import type { DiskQueue } from './queue.js';
import type { HeadRecord } from './read-cursor.js';

/** A reserved record: its value and the offset to `ack` or `commit`. */
export interface Reservation<T> {
  value: T;
  /** Position of the record in the log: `(segment << 48) | file position`. */
  offset: bigint;
}

export class Reader<T> {
  /** How long the last record read waited in the queue, in ms (needs `stampRecords`; 0 otherwise). */
  lastAgeMs = 0;
  private copy = new Uint8Array(256);

  /** @internal Use `queue.reader()`. */
  constructor(private readonly q: DiskQueue<T>) {}

  /**
   * Takes the head record and commits it. Resolves `undefined` when the queue is empty.
   *
   * @throws CorruptError damage was stepped past (already counted); call again to continue.
   * @throws CodecError the head record does not decode; it stays at the head (`skip()` discards it).
   * @throws IOError a read failed; nothing moved.
   * @throws ClosedError the queue is closed.
   */
  async tryTake(): Promise<{ value: T } | undefined> {
    const r = await this.consume(true);
    return r && { value: r.value };
  }

  /** Like {@link tryTake}, but waits for a record. Rejects with the abort reason, or `ClosedError` on close. */
  async take(opts: { signal?: AbortSignal } = {}): Promise<T> {
    for (;;) {
      const since = this.q.published.generation;
      const r = await this.consume(true);
      if (r) return r.value;
      await this.q.published.wait(opts.signal, () => this.q.closedError(), since);
    }
  }

  /** Reserves the head record without committing it; `undefined` when empty. Errors as {@link tryTake}. */
  async tryReserve(): Promise<Reservation<T> | undefined> {
    return this.consume(false);
  }

  /** Like {@link tryReserve}, but waits for a record. */
  async reserve(opts: { signal?: AbortSignal } = {}): Promise<Reservation<T>> {
    for (;;) {
      const since = this.q.published.generation;
      const r = await this.consume(false);
      if (r) return r;
      await this.q.published.wait(opts.signal, () => this.q.closedError(), since);
    }
  }

  /**
   * Retires the one reserved record at `offset`. Idempotent; in any order.
   * It reaches disk once every record before it is retired too.
   *
   * @throws OffsetError no record was reserved at `offset`.
   * @throws InvalidArgumentError `offset` is not a non-negative bigint.
   * @throws IOError the queue is latched, or persisting failed.
   */
  async ack(offset: bigint): Promise<void> {
    this.q.checkWritable();
    checkOffset(offset);
    if (this.q.ledger.ack(offset)) {
      await this.q.retire();
      return;
    }
    if (this.isCommitted(offset)) return;
    throw new OffsetError(`no reserved record at offset ${offset}`);
  }

  /**
   * Retires the record at `offset` and every record before it, whoever reserved
   * them. An offset inside a record rounds down to that record. Committing an
   * already committed offset does nothing.
   *
   * @throws OffsetError `offset` is past what has been read.
   * @throws InvalidArgumentError `offset` is not a non-negative bigint.
   * @throws IOError the queue is latched, or persisting failed.
   */
  async commit(offset: bigint): Promise<void> {
    this.q.checkWritable();
    checkOffset(offset);
    const c = this.q.cursor;
    if (c.seg === undefined || offset >= packOffset(c.seg.seq, c.pos)) {
      if (this.isCommitted(offset)) return;
      throw new OffsetError(`offset ${offset} has not been read`);
    }
    this.q.ledger.ackThrough(offset);
    await this.q.retire();
  }

  /**
   * Discards the head record without decoding it (the way past a record the
   * codec will never accept). Resolves false when the queue is empty.
   */
  async skip(): Promise<boolean> {
    this.q.checkOpen();
    const h = this.q.cursor.next();
    if (!h) return false;
    if (h.kind === 'damage') return this.stepPastDamage(h.err);
    this.q.cursor.advance(h.rec, true);
    await this.q.retire();
    return true;
  }

  /**
   * Moves the head record to the back of the queue, even when the queue is
   * full (its stamp, if any, is kept). Resolves false when the queue is empty.
   */
  async requeue(): Promise<boolean> {
    this.q.checkWritable();
    const h = this.q.cursor.next();
    if (!h) return false;
    if (h.kind === 'damage') return this.stepPastDamage(h.err);
    // The copy is written and the original retired in one step, so no other
    // call can read the original in between; one flush then covers both.
    this.q.place(h.rec.payload, true);
    this.q.cursor.advance(h.rec, true);
    const moved = this.q.settleCommits();
    await this.q.afterWrites(moved ? 2 : 1);
    return true;
  }

  /**
   * The head record's value without consuming it: no cursor moves and the next
   * read returns the same record. Damage answers `CorruptError` with nothing
   * dropped and nothing counted.
   */
  async tryPeek(): Promise<{ value: T } | undefined> {
    this.q.checkOpen();
    const h = this.q.cursor.peek();
    if (!h) return undefined;
    if (h.kind === 'damage') throw h.err;
    return { value: this.decode(h.rec) };
  }

  /** Takes (and commits) every record present when iteration begins. Read errors are thrown by the iterator. */
  async *drain(): AsyncGenerator<T, void, undefined> {
    this.q.checkOpen();
    let left = this.q.cursor.unread();
    while (left-- > 0) {
      const r = await this.tryTake();
      if (!r) return;
      yield r.value;
    }
  }

  /** Takes records as they arrive until `signal` aborts or the queue closes; then it ends quietly. */
  async *follow(opts: { signal?: AbortSignal } = {}): AsyncGenerator<T, void, undefined> {
    for (;;) {
      let v: T;
      try {
        v = await this.take(opts);
      } catch (err) {
        if (opts.signal?.aborted || (err as { code?: string })?.code === 'ERR_CLOSED') return;
        throw err;
      }
      yield v;
    }
  }

  /**
   * Damage at the head was stepped past and booked by the cursor: retire it
   * and report it. Its commit is best effort; the event is what the caller
   * must hear about.
   */
  private async stepPastDamage(err: CorruptError): Promise<never> {
    await this.q.retire().catch(() => {});
    throw err;
  }

  /**
   * One consuming read. Everything that touches the shared cursor, the ledger
   * and the counters happens before the first `await`, so concurrent calls
   * (on this reader or another) each get their own record: an `await` between
   * reading the head and moving past it would hand one record to every caller
   * that ran in between.
   */
  private async consume(commit: boolean): Promise<Reservation<T> | undefined> {
    this.q.checkOpen();
    const h = this.q.cursor.next();
    if (!h) return undefined;
    if (h.kind === 'damage') return this.stepPastDamage(h.err);
    const rec = h.rec;
    const value = this.decode(rec);
    const offset = this.q.cursor.advance(rec, commit);
    this.q.counters.delivered++;
    if (commit) {
      // The value is already ours; a failed commit persists later or replays,
      // and a latch surfaces on the next add, commit or sync.
      await this.q.retire().catch(() => {});
    }
    return { value, offset: offset ?? 0n };
  }

  private decode(rec: HeadRecord): T {
    let bytes = rec.payload;
    if (this.q.opts.stampRecords) {
      if (bytes.length < STAMP_SIZE) {
        throw new CodecError(`record at segment ${rec.seg.seq} position ${rec.start} is shorter than its stamp`);
      }
      const stampNs = new DataView(bytes.buffer, bytes.byteOffset, STAMP_SIZE).getBigUint64(0, false);
      this.lastAgeMs = Math.max(0, Date.now() - Number(stampNs / 1_000_000n));
      bytes = bytes.subarray(STAMP_SIZE);
    }
    const codec = this.q.opts.codec;
    if (!codec.decodeCopies) {
      // The block buffer is shared by every reader; the codec's value may alias
      // what it is given, so it gets this reader's own copy.
      if (this.copy.length < bytes.length) this.copy = new Uint8Array(Math.max(bytes.length, this.copy.length * 2));
      this.copy.set(bytes);
      bytes = this.copy.subarray(0, bytes.length);
    }
    try {
      return codec.decode(bytes);
    } catch (err) {
      throw err instanceof CodecError
        ? err
        : new CodecError(`codec refused the record at segment ${rec.seg.seq} position ${rec.start}: ${(err as Error)?.message ?? err}`, { cause: err });
    }
  }

  private isCommitted(offset: bigint): boolean {
    const first = this.q.segments[0];
    return first === undefined || offset < packOffset(first.seq, first.commitCursor);
  }
}


function checkOffset(offset: unknown): void {
  if (typeof offset !== 'bigint' || offset < 0n) throw new InvalidArgumentError(`offset must be a non-negative bigint from reserve(), got ${String(offset)}`);
}
