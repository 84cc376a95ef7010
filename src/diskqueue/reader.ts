/**
 * A consumer of a DiskQueue (the Go diskqueue, "Consuming"). Readers of one queue
 * share its read cursor and cooperate: each record goes to one of them.
 *
 * - At most once: `take`, `tryTake`, `drain`, `follow` read and commit in one call.
 * - At least once: `reserve`/`tryReserve` hand out a record and its offset;
 *   `ack(offset)` retires that record alone (safe with competing workers),
 *   `commit(offset)` retires it and everything before it (one consumer).
 *
 * Every method may run while any other is in flight, on this reader or
 * another: each does its work on the shared cursor before it first awaits.
 * Still, give each consumer its own reader: the bytes a codec decodes are
 * this reader's private copy, valid until its next read (a batch read gives
 * each of its records a copy of its own), so a codec whose values alias its
 * input (none of the shipped ones) needs one reader per concurrent call; and
 * `lastAgeMs` is the last read's.
 */
import { CodecError, CorruptError, InvalidArgumentError, isFerryError, OffsetError } from '../errors.js';
import { STAMP_SIZE } from './format.js';
import { checkCallOptions, checkIterable } from './options.js';
import type { LedgerEntry } from './ledger.js';
import type { Segment } from './segment.js';
import type { ReadHost } from './read-host.js';
import { shown } from '../show-value.js';

/** A reserved record: its value and the offset to `ack` or `commit`. */
export interface Reservation<T> {
  value: T;
  /** Position of the record in the log: `(segment << 48) | file position`. */
  offset: bigint;
}

/** A consuming read done: its value, its offset (for a reservation), and the flush its commit waits for. */
interface Consumed<T> {
  value: T;
  offset: bigint;
  flush: Promise<void> | undefined;
}

const EMPTY: Promise<undefined> = Promise.resolve(undefined);
const DONE: Promise<void> = Promise.resolve();
const noop = () => {};

export class Reader<T> {
  /** How long the last record read waited in the queue, in ms (needs `stampRecords`; 0 otherwise). */
  lastAgeMs = 0;
  private copy = new Uint8Array(256);

  /** @internal Use `queue.reader()`. */
  constructor(private readonly host: ReadHost<T>) {}

  /**
   * Takes the head record and commits it. Resolves `undefined` when the queue is empty.
   *
   * @throws CorruptError damage was stepped past (already counted); call again to continue.
   * @throws CodecError the head record does not decode; it stays at the head (`skip()` discards it).
   * @throws IOError a read failed; nothing moved.
   * @throws ClosedError the queue is closed.
   */
  tryTake(): Promise<{ value: T } | undefined> {
    let r: Consumed<T> | undefined;
    try {
      r = this.consumeNow(true);
    } catch (err) {
      return Promise.reject(err);
    }
    if (!r) return EMPTY;
    const out = { value: r.value };
    return r.flush ? r.flush.then(() => out) : Promise.resolve(out);
  }

  /** Like {@link tryTake}, but waits for a record. Rejects with the abort reason, or `ClosedError` on close. */
  async take(opts: { signal?: AbortSignal } = {}): Promise<T> {
    checkCallOptions(opts);
    for (;;) {
      const since = this.host.published.generation;
      const r = this.consumeNow(true);
      if (r) {
        if (r.flush) await r.flush;
        return r.value;
      }
      await this.host.published.wait(opts.signal, () => this.host.closedError(), since);
    }
  }

  /**
   * Takes (and commits) up to `max` records from the head with one commit for
   * all of them: one header write, and under the per-op policy one flush.
   * Resolves `[]` when the queue is empty. It stops early, returning what it
   * has, at damage or at a record the codec refuses; the next call reports
   * that one. At most once, like {@link tryTake}: a crash after the commit
   * loses the whole batch, not one record.
   *
   * @throws InvalidArgumentError `max` is not a positive integer.
   * @throws CorruptError, CodecError, IOError, ClosedError as {@link tryTake}, when the head itself fails.
   */
  takeBatch(max: number): Promise<T[]> {
    const out: T[] = [];
    let flush: Promise<void> | undefined;
    try {
      this.consumeBatch(max, (value) => out.push(value), true);
      if (out.length > 0) flush = this.quietRetire();
    } catch (err) {
      return Promise.reject(err);
    }
    return flush ? flush.then(() => out) : Promise.resolve(out);
  }

  /** Reserves the head record without committing it; `undefined` when empty. Errors as {@link tryTake}. */
  tryReserve(): Promise<Reservation<T> | undefined> {
    let r: Consumed<T> | undefined;
    try {
      r = this.consumeNow(false);
    } catch (err) {
      return Promise.reject(err);
    }
    return r ? Promise.resolve({ value: r.value, offset: r.offset }) : EMPTY;
  }

  /** Like {@link tryReserve}, but waits for a record. */
  async reserve(opts: { signal?: AbortSignal } = {}): Promise<Reservation<T>> {
    checkCallOptions(opts);
    for (;;) {
      const since = this.host.published.generation;
      const r = this.consumeNow(false);
      if (r) return { value: r.value, offset: r.offset };
      await this.host.published.wait(opts.signal, () => this.host.closedError(), since);
    }
  }

  /**
   * Reserves up to `max` records from the head without committing them;
   * `[]` when the queue is empty. Stops early as {@link takeBatch} does.
   * Acknowledge them with {@link ackBatch}, {@link ack} or {@link commit}.
   *
   * @throws InvalidArgumentError `max` is not a positive integer.
   * @throws CorruptError, CodecError, IOError, ClosedError as {@link tryTake}, when the head itself fails.
   */
  reserveBatch(max: number): Promise<Reservation<T>[]> {
    const out: Reservation<T>[] = [];
    try {
      this.consumeBatch(max, (value, offset) => out.push({ value, offset }), false);
    } catch (err) {
      return Promise.reject(err);
    }
    return Promise.resolve(out);
  }

  /**
   * Retires the one reserved record at `offset`. Idempotent; in any order.
   * It reaches disk once every record before it is retired too.
   *
   * @throws OffsetError no record was reserved at `offset`.
   * @throws InvalidArgumentError `offset` is not a non-negative bigint.
   * @throws IOError the queue is latched, or persisting failed.
   */
  ack(offset: bigint): Promise<void> {
    try {
      this.host.checkWritable();
      checkOffset(offset);
      if (this.host.ledger.ack(offset)) return this.retire() ?? DONE;
      if (this.host.cursor.isCommitted(offset)) return DONE;
      throw new OffsetError(`no reserved record at offset ${offset}`);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /**
   * Retires each reserved record in `offsets`, in any order, with one commit
   * for all of them (one header write; under the per-op policy one flush).
   * All or nothing: when one offset is unknown, none is acknowledged.
   *
   * @throws OffsetError an offset was never reserved (and is not committed).
   * @throws InvalidArgumentError an offset is not a non-negative bigint.
   * @throws IOError the queue is latched, or persisting failed.
   */
  ackBatch(offsets: Iterable<bigint>): Promise<void> {
    try {
      this.host.checkWritable();
      checkIterable('offsets', offsets);
      const ledger = this.host.ledger;
      // Every offset is checked before any is acknowledged (all or nothing);
      // each is looked up once.
      const found: LedgerEntry[] = [];
      for (const o of offsets) {
        checkOffset(o);
        const e = ledger.lookup(o);
        if (e) found.push(e);
        else if (!this.host.cursor.isCommitted(o)) throw new OffsetError(`no reserved record at offset ${o}`);
      }
      for (const e of found) ledger.ackEntry(e);
      return (found.length > 0 && this.retire()) || DONE;
    } catch (err) {
      return Promise.reject(err);
    }
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
    this.host.checkWritable();
    checkOffset(offset);
    const cursor = this.host.cursor;
    if (cursor.isUnread(offset)) {
      if (cursor.isCommitted(offset)) return;
      throw new OffsetError(`offset ${offset} has not been read`);
    }
    this.host.ledger.ackThrough(offset);
    await this.retire();
  }

  /**
   * Discards the head record without decoding it (the way past a record the
   * codec will never accept). Resolves false when the queue is empty.
   */
  async skip(): Promise<boolean> {
    this.host.checkOpen();
    const h = this.host.cursor.next();
    if (!h) return false;
    if (h.kind === 'damage') return this.stepPastDamage(h.err);
    this.host.cursor.advance(h.rec, true);
    await this.retire();
    return true;
  }

  /**
   * Moves the head record to the back of the queue, even when the queue is
   * full (its stamp, if any, is kept). Resolves false when the queue is empty.
   */
  async requeue(): Promise<boolean> {
    this.host.checkWritable();
    const h = this.host.cursor.next();
    if (!h) return false;
    if (h.kind === 'damage') return this.stepPastDamage(h.err);
    // The copy is written and the original retired in one step, so no other
    // call can read the original in between; one flush then covers both.
    this.host.appender.placeOne(h.rec.payload, true);
    this.host.cursor.advance(h.rec, true);
    const moved = this.host.settleCommits();
    await this.host.persist(moved ? 2 : 1);
    return true;
  }

  /**
   * The head record's value without consuming it: no cursor moves and the next
   * read returns the same record. Damage answers `CorruptError` with nothing
   * dropped and nothing counted.
   */
  async tryPeek(): Promise<{ value: T } | undefined> {
    this.host.checkOpen();
    const h = this.host.cursor.peek();
    if (!h) return undefined;
    if (h.kind === 'damage') throw h.err;
    return { value: this.decode(h.rec.payload, h.rec.seg, h.rec.start) };
  }

  /**
   * Takes (and commits) every record present when iteration begins. Read
   * errors are thrown by the iterator.
   *
   * `batchSize` above 1 takes that many records per commit (see
   * {@link takeBatch}): faster, and at most once per block rather than per
   * record, so a crash while the loop body runs loses up to `batchSize`
   * records already committed instead of one. The default commits each record
   * as it is handed out.
   *
   * @throws InvalidArgumentError `batchSize` is not a positive integer.
   */
  async *drain(opts: { batchSize?: number } = {}): AsyncGenerator<T, void, undefined> {
    checkCallOptions(opts);
    const batchSize = opts.batchSize ?? 1;
    checkMax(batchSize, 'batchSize');
    this.host.checkOpen();
    let left = this.host.cursor.unread();
    if (batchSize > 1) {
      while (left > 0) {
        const values = await this.takeBatch(Math.min(batchSize, left));
        if (values.length === 0) return;
        left -= values.length;
        // Not `yield*`: delegating to an array from an async generator goes
        // through an async wrapper of its iterator, at about twice the cost per value.
        for (const v of values) yield v;
      }
      return;
    }
    while (left-- > 0) {
      const r = this.consumeNow(true);
      if (!r) return;
      if (r.flush) await r.flush;
      yield r.value;
    }
  }

  /** Takes records as they arrive until `signal` aborts or the queue closes; then it ends quietly. */
  async *follow(opts: { signal?: AbortSignal } = {}): AsyncGenerator<T, void, undefined> {
    checkCallOptions(opts);
    for (;;) {
      let v: T;
      try {
        v = await this.take(opts);
      } catch (err) {
        if (opts.signal?.aborted || isFerryError(err, 'ERR_CLOSED')) return;
        throw err;
      }
      yield v;
    }
  }

  /**
   * Retires what the ledger holds done: moves the commit cursor and returns
   * the flush the policy wants for it, if any.
   */
  private retire(): Promise<void> | undefined {
    return this.host.settleCommits() ? this.host.persist(1) : undefined;
  }

  /**
   * The commit of a read that commits itself. Its failure is not the read's:
   * the value is the caller's already, a failed commit persists later or
   * replays, and a latch surfaces on the next add, commit or sync.
   */
  private quietRetire(): Promise<void> | undefined {
    try {
      return this.retire()?.catch(noop);
    } catch {
      return undefined;
    }
  }

  /**
   * Damage at the head was stepped past and booked by the cursor: retire it
   * and report it. Its commit is best effort; the event is what the caller
   * must hear about.
   */
  private stepPastDamage(err: CorruptError): never {
    this.quietRetire();
    throw err;
  }

  /**
   * One consuming read, synchronous from the head to the cursor move: every
   * change to the shared cursor, the ledger and the counters happens before
   * anything awaits, so concurrent calls (on this reader or another) each get
   * their own record. An `await` between reading the head and moving past it
   * would hand one record to every caller that ran in between.
   */
  private consumeNow(commit: boolean): Consumed<T> | undefined {
    this.host.checkOpen();
    const h = this.host.cursor.next();
    if (!h) return undefined;
    if (h.kind === 'damage') this.stepPastDamage(h.err);
    const value = this.decode(h.rec.payload, h.rec.seg, h.rec.start);
    const offset = this.host.cursor.advance(h.rec, commit);
    this.host.counters.delivered++;
    return { value, offset: offset ?? 0n, flush: commit ? this.quietRetire() : undefined };
  }

  /**
   * Up to `max` consuming reads in one step, each handed to `emit`. Damage or
   * a codec failure at the head of the batch throws; later in the batch it
   * ends the batch, and stays at the head for the next call to report.
   */
  private consumeBatch(max: number, emit: (value: T, offset: bigint) => void, commit: boolean): void {
    checkMax(max, 'max');
    this.host.checkOpen();
    const cursor = this.host.cursor;
    const counters = this.host.counters;
    // After the first record, the intact records already in the cursor's
    // block go through `run`; a value that does not decode stops the run and
    // the batch, and stays at the head.
    const visit = (seg: Segment, start: number, payload: Uint8Array, offset: bigint | undefined): boolean => {
      let value: T;
      try {
        value = this.decode(payload, seg, start, true);
      } catch {
        return false;
      }
      counters.delivered++;
      emit(value, offset ?? 0n);
      return true;
    };
    for (let n = 0; n < max; n++) {
      if (n > 0) {
        if (cursor.lossPending) return;
        const ran = cursor.run(max - n, commit, visit);
        if (ran > 0) {
          n += ran - 1;
          continue;
        }
      }
      const h = n > 0 ? cursor.peek() : cursor.next();
      if (!h) return;
      if (h.kind === 'damage') {
        if (n > 0) return;
        this.stepPastDamage(h.err);
      }
      let value: T;
      try {
        value = this.decode(h.rec.payload, h.rec.seg, h.rec.start, true);
      } catch (err) {
        if (n > 0) return;
        throw err;
      }
      const offset = cursor.advance(h.rec, commit);
      counters.delivered++;
      emit(value, offset ?? 0n);
    }
  }

  /**
   * Decodes the payload of the record at `seg`/`start` (named in errors). A
   * codec that may alias its input gets the reader's private copy, or with
   * `own` (the records of a batch, all handed out together) a copy of its own.
   */
  private decode(payload: Uint8Array, seg: Segment, start: number, own = false): T {
    let bytes = payload;
    if (this.host.opts.stampRecords) {
      if (bytes.length < STAMP_SIZE) {
        throw new CodecError(`record at segment ${seg.seq} position ${start} is shorter than its stamp`);
      }
      const stampNs = new DataView(bytes.buffer, bytes.byteOffset, STAMP_SIZE).getBigUint64(0, false);
      this.lastAgeMs = Math.max(0, Date.now() - Number(stampNs / 1_000_000n));
      bytes = bytes.subarray(STAMP_SIZE);
    }
    const codec = this.host.opts.codec;
    if (!codec.decodeCopies) {
      // The block buffer is shared by every reader; the codec's value may alias
      // what it is given, so it gets this reader's own copy.
      if (own) bytes = bytes.slice();
      else {
        if (this.copy.length < bytes.length) this.copy = new Uint8Array(Math.max(bytes.length, this.copy.length * 2));
        this.copy.set(bytes);
        bytes = this.copy.subarray(0, bytes.length);
      }
    }
    try {
      return codec.decode(bytes);
    } catch (err) {
      throw err instanceof CodecError
        ? err
        : new CodecError(`codec refused the record at segment ${seg.seq} position ${start}: ${(err as Error)?.message ?? err}`, { cause: err });
    }
  }
}


function checkMax(n: unknown, name: string): void {
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError(`${name} must be a positive integer, got ${shown(n)}`);
}

function checkOffset(offset: unknown): void {
  if (typeof offset !== 'bigint' || offset < 0n) throw new InvalidArgumentError(`offset must be a non-negative bigint from reserve(), got ${shown(offset)}`);
}
