/**
 * The shared read cursor and its block buffer.
 *
 * Every reader of a queue reads through this one cursor, so each record goes
 * to exactly one of them. Reads go through a block buffer holding a run of a
 * segment (one pread per block rather than one per record); a record larger
 * than the block gets a buffer of its own size, never more: its length was
 * already checked against the segment's write cursor.
 *
 * Damage is stepped past by consuming reads only, and booked once: a span
 * booked before a rewind is passed silently the second time.
 */
import { CorruptError, IOError, type CorruptReason } from '../errors.js';
import { frameRecord, checksumMatches, readUvarint, CHECKSUM_SIZE, HEADER_SIZE, type RecordFrame } from './format.js';
import { xxh64 } from '../storage/xxhash.js';
import { walkRecords, type Segment } from './segment.js';
import type { FileHandle, FileSystem } from '../storage/fs.js';
import { packOffset, type AckLedger } from './ledger.js';

/** A record at the head: its bytes are valid until the next read through the cursor. */
export interface HeadRecord {
  seg: Segment;
  start: number;
  end: number;
  payload: Uint8Array;
}

export type HeadResult = { kind: 'record'; rec: HeadRecord } | { kind: 'damage'; err: CorruptError };

/** What the read cursor needs of its queue. */
export interface CursorHost {
  readonly opts: { readonly fs: FileSystem };
  /** The live segments, oldest first. */
  readonly segments: readonly Segment[];
  /** Where every record the cursor passes is entered until the commit cursor crosses it. */
  readonly ledger: AckLedger;
  /** The loss counters damage stepped past is booked in. */
  readonly counters: { corruptions: number; lostBytes: number; lostRecords: number };
  /** Moves `seg`'s commit cursor to `end` across `records` records (a read that retires itself with nothing outstanding before it). */
  commitDirect(seg: Segment, end: number, records: number): void;
}

const BLOCK_SIZE = 1 << 20;

interface Located {
  buf: Uint8Array;
  base: number;
  frame: RecordFrame | 'damaged';
}

export class ReadCursor {
  seg: Segment | undefined;
  pos: number;
  private readonly block = new Uint8Array(BLOCK_SIZE);
  /** A view over the block, for reading checksums without a lookup per record. */
  private readonly blockView = new DataView(this.block.buffer);
  private blockSeg: Segment | undefined;
  private blockStart = 0;
  private blockLen = 0;
  private booked = new Set<string>();
  /** The sealed segment whose file was last checked to still exist. */
  private probed: Segment | undefined;

  constructor(
    private readonly host: CursorHost,
    /** Loss events found at open, reported by the next consuming reads. */
    private readonly events: CorruptError[],
  ) {
    this.seg = host.segments[0];
    this.pos = this.seg?.commitCursor ?? HEADER_SIZE;
  }

  /** Loss events found at open are still waiting to be reported by a consuming read. */
  get lossPending(): boolean {
    return this.events.length > 0;
  }

  /** The head record, without moving. Damage answers a `CorruptError` that books nothing. */
  peek(): HeadResult | undefined {
    return this.head(false);
  }

  /**
   * The head record, for a consuming read: damage at the head is stepped past
   * and booked (counted, entered in the ledger as done) before it is returned.
   */
  next(): HeadResult | undefined {
    const ev = this.events.shift();
    if (ev) return { kind: 'damage', err: ev };
    return this.head(true);
  }

  /**
   * Moves past `rec`. A reservation (`done` false) enters the ledger and gets
   * its offset back. A self-retiring read with nothing outstanding before it
   * moves the commit cursor directly (the common case of `take`).
   */
  advance(rec: HeadRecord, done: boolean): bigint | undefined {
    rec.seg.readCount++;
    this.pos = rec.end;
    const offset = done ? undefined : rec.seg.offsetBase + BigInt(rec.start);
    if (done && this.host.ledger.size === 0) this.host.commitDirect(rec.seg, rec.end, 1);
    else this.host.ledger.add({ seg: rec.seg, start: rec.start, end: rec.end, records: 1, done, offset });
    this.passDone();
    return offset;
  }

  /**
   * The batch path: moves past the intact records that follow the cursor in
   * the block already read, handing each to `visit` first, until `max`
   * records, the block's end, the write cursor, or a record `visit` refuses
   * or that is not plainly intact (a long length, a bad checksum, a record cut
   * by the block's end). Those, and anything else out of the ordinary (loss
   * events, a rewind's passed entries, a segment not yet probed), are left to
   * `next`/`peek`; 0 says so. Each record moved past is booked as `advance`
   * books it, with one commit for the run when it commits directly.
   */
  run(max: number, done: boolean, visit: (seg: Segment, start: number, payload: Uint8Array, offset: bigint | undefined) => boolean): number {
    const seg = this.seg;
    const ledger = this.host.ledger;
    if (seg === undefined || seg !== this.blockSeg || this.events.length > 0 || ledger.passing) return 0;
    if (seg.sealed && seg !== this.probed) return 0;
    const block = this.block;
    const buffer = block.buffer;
    const view = this.blockView;
    const base = this.blockStart;
    const limit = Math.min(this.blockLen, seg.writeCursor - base);
    const direct = done && ledger.size === 0;
    let at = this.pos - base;
    if (at < 0) return 0;
    let n = 0;
    while (n < max && at + 1 < limit) {
      // Lengths of one or two bytes only (records under 16 KiB).
      const b0 = block[at]!;
      let ps: number;
      let len: number;
      if (b0 < 0x80) {
        ps = at + 1;
        len = b0;
      } else if (block[at + 1]! < 0x80) {
        ps = at + 2;
        len = (b0 & 0x7f) | (block[at + 1]! << 7);
      } else break;
      const pe = ps + len;
      if (pe + CHECKSUM_SIZE > limit) break;
      // A view built on the buffer costs less than `subarray` (no species lookup); the block starts at its buffer's byte 0.
      const payload = new Uint8Array(buffer, ps, len);
      if (view.getBigUint64(pe, true) !== xxh64(payload)) break;
      const start = base + at;
      const offset = done ? undefined : seg.offsetBase + BigInt(start);
      if (!visit(seg, start, payload, offset)) break;
      at = pe + CHECKSUM_SIZE;
      n++;
      if (!direct) ledger.add({ seg, start, end: base + at, records: 1, done, offset });
    }
    if (n === 0) return 0;
    seg.readCount += n;
    this.pos = base + at;
    if (direct) this.host.commitDirect(seg, this.pos, n);
    return n;
  }

  /**
   * Steps over entries a rewind left done right after the cursor, so they
   * rejoin the ledger behind the record just read and the commit cursor can
   * cross them now, not only when the next read comes.
   */
  private passDone(): void {
    if (!this.host.ledger.passing) return;
    while (this.settle()) {
      const passed = this.host.ledger.passAt(this.seg!, this.pos);
      if (!passed) return;
      this.pos = passed.end;
    }
  }

  /** Unread published records. */
  unread(): number {
    let n = 0;
    for (const s of this.host.segments) n += s.writtenCount - s.readCount;
    return n;
  }

  /** Whether `offset` lies before the commit cursor (its record is committed, or reclaimed with its segment). */
  isCommitted(offset: bigint): boolean {
    const first = this.host.segments[0];
    return first === undefined || offset < packOffset(first.seq, first.commitCursor);
  }

  /** Whether `offset` lies at or past the cursor: nothing has been read there yet. */
  isUnread(offset: bigint): boolean {
    return this.seg === undefined || offset >= packOffset(this.seg.seq, this.pos);
  }

  /**
   * Goes back to the oldest outstanding reservation, so every reserved and
   * unacknowledged record is read again. Records already done behind it are
   * passed, not read again: a rewind returns reservations, it does not undo
   * takes, acks, skips or requeues.
   */
  rewind(): void {
    const r = this.host.ledger.rewind();
    if (!r) return;
    for (const e of r.dropped) e.seg.readCount -= e.records;
    this.seg = r.first.seg;
    this.pos = r.first.start;
  }

  /** `seg` was reclaimed; drop references to it. */
  forget(seg: Segment): void {
    if (this.blockSeg === seg) this.blockSeg = undefined;
    if (this.seg === seg) {
      this.seg = this.nextSegment(seg);
      this.pos = this.seg?.commitCursor ?? HEADER_SIZE;
    }
  }

  /** The segment after `seg` (the oldest one when `seg` was reclaimed), if any. */
  private nextSegment(seg: Segment): Segment | undefined {
    const segments = this.host.segments;
    const i = segments.indexOf(seg);
    return i >= 0 ? segments[i + 1] : segments[0];
  }

  /** Moves the cursor across segment ends; false when nothing published is left. */
  private settle(): boolean {
    this.seg ??= this.host.segments[0];
    if (!this.seg) return false;
    while (this.pos >= this.seg.writeCursor) {
      // The tail, or a sealed segment still waiting for records to be published.
      if (!this.seg.sealed || this.seg.end > this.seg.writeCursor) return false;
      const next = this.nextSegment(this.seg);
      if (!next) return false;
      this.seg = next;
      this.pos = HEADER_SIZE;
    }
    return true;
  }

  private head(consume: boolean): HeadResult | undefined {
    for (;;) {
      this.passDone();
      if (!this.settle()) return undefined;
      const seg = this.seg!;
      let found: HeadRecord | { end: number; records: number; reason: CorruptReason };
      try {
        found = this.frameAt(seg);
      } catch (err) {
        if (!(err instanceof MissingSegment)) throw err;
        // Deleted underneath the queue: what was unread in it is one loss.
        found = { end: seg.writeCursor, records: Math.max(0, seg.writtenCount - seg.readCount), reason: 'missing' };
      }
      if ('payload' in found) return { kind: 'record', rec: found };
      const damage = this.damage(seg, this.pos, found.end, found.records, found.reason, consume);
      if (damage) return damage;
    }
  }

  /** The record at the cursor, or the damaged span that starts there. */
  private frameAt(seg: Segment): HeadRecord | { end: number; records: number; reason: CorruptReason } {
    if (seg !== this.probed && seg.sealed) this.probe(seg);
    const at = this.locate(seg, this.pos);
    const f = at.frame;
    if (f !== 'damaged' && checksumMatches(at.buf, f, at.buf === this.block ? this.blockView : undefined)) {
      return { seg, start: this.pos, end: at.base + f.end, payload: at.buf.subarray(f.payloadStart, f.payloadEnd) };
    }
    if (f !== 'damaged' && f.payloadEnd > f.payloadStart && this.resyncsAt(seg, at.base + f.end)) {
      // The frame holds, only its payload (or checksum) is bad: one record
      // lost — unless a damaged length happened to land on a later boundary.
      return { end: at.base + f.end, records: this.recordsIn(seg, at.base + f.end), reason: 'checksum' };
    }
    // The length prefix is unusable (or an empty frame fails its checksum):
    // record boundaries are gone for the rest of the segment.
    return { end: seg.writeCursor, records: Math.max(0, seg.writtenCount - seg.readCount), reason: 'length' };
  }

  /**
   * Whether a record boundary at `pos` is believable after a checksum failure:
   * it is the segment's write cursor, or an intact record starts there. A
   * length prefix that was damaged but still frames inside the segment lands
   * mid-record, and believing it would step through garbage one false frame
   * at a time, each booked as a record it is not; such a length is treated as
   * what it is, a lost boundary.
   */
  private resyncsAt(seg: Segment, pos: number): boolean {
    if (pos === seg.writeCursor) return true;
    const at = this.locate(seg, pos);
    return at.frame !== 'damaged' && checksumMatches(at.buf, at.frame);
  }

  /**
   * How many records the damaged span from the cursor to `end` held. The
   * damaged frame cannot say, but the segment's written count can: whatever
   * is unread and not accounted for by the intact records from `end` to the
   * write cursor was in the span. When the rest of the segment is not intact
   * either, the span is counted as one record and the next event, which ends
   * the segment, takes up the difference.
   */
  private recordsIn(seg: Segment, end: number): number {
    const unread = seg.writtenCount - seg.readCount;
    if (end === seg.writeCursor) return Math.max(1, unread);
    const fh = this.fileOf(seg);
    let walk;
    try {
      walk = walkRecords(fh, end, seg.writeCursor);
    } catch (err) {
      throw new IOError(`read of segment ${seg.seq} after ${end} failed: ${(err as Error)?.message ?? err}`, { cause: err });
    }
    return walk.end === seg.writeCursor ? Math.max(1, unread - walk.count) : 1;
  }

  /** Books (when consuming) a damaged span and returns its error; undefined when it was booked before. */
  private damage(seg: Segment, start: number, end: number, records: number, reason: CorruptReason, consume: boolean): HeadResult | undefined {
    const err = new CorruptError({ segment: seg.seq, position: start, reason, lostBytes: end - start, lostRecords: records });
    if (!consume) return { kind: 'damage', err };
    const key = `${seg.seq}:${start}`;
    const fresh = !this.booked.has(key);
    this.booked.add(key);
    this.host.ledger.add({ seg, start, end, records, done: true, offset: undefined });
    seg.readCount += records;
    this.pos = end;
    this.passDone();
    if (!fresh) return undefined;
    const c = this.host.counters;
    c.corruptions++;
    c.lostBytes += end - start;
    c.lostRecords += records;
    return { kind: 'damage', err };
  }

  /** Frames the record at `pos`, reading through the block buffer. */
  private locate(seg: Segment, pos: number): Located {
    const limit = seg.writeCursor;
    if (this.blockSeg === seg && pos >= this.blockStart && pos < this.blockStart + this.blockLen) {
      const f = frameRecord(this.block, pos - this.blockStart, this.blockLen, limit - this.blockStart);
      if (f !== 'need') return this.located(this.block, this.blockStart, f);
    }
    const want = Math.min(this.block.length, limit - pos);
    this.blockSeg = undefined;
    const n = this.read(seg, this.block.subarray(0, want), pos);
    this.blockSeg = seg;
    this.blockStart = pos;
    this.blockLen = n;
    const f = frameRecord(this.block, 0, n, limit - pos);
    if (f !== 'need') return this.located(this.block, pos, f);
    if (n < want) return { buf: this.block, base: pos, frame: 'damaged' }; // file shorter than its cursor
    // A record larger than the block: read it whole into its own buffer.
    const v = readUvarint(this.block, 0, n)!;
    const big = new Uint8Array(v.size + v.value + CHECKSUM_SIZE);
    const m = this.read(seg, big, pos);
    const g = frameRecord(big, 0, m, limit - pos);
    return this.located(big, pos, g === 'need' ? 'length' : g);
  }

  private located(buf: Uint8Array, base: number, f: RecordFrame | 'length'): Located {
    return { buf, base, frame: f === 'length' ? 'damaged' : f };
  }

  /**
   * Checks, once each time the cursor enters a sealed segment, that its file
   * still has a name. A descriptor opened earlier would go on reading a
   * deleted file, so without this a segment removed underneath the queue
   * would be noticed only when `maxOpenFiles` closed its handle — or never,
   * and its records would vanish at the next open without a word. One open
   * per segment switch is the whole cost.
   */
  private probe(seg: Segment): void {
    try {
      this.host.opts.fs.open(seg.path, 'r').close();
    } catch (err) {
      if (isMissing(err)) throw new MissingSegment();
      throw new IOError(`cannot open segment ${seg.seq}: ${(err as Error)?.message ?? err}`, { cause: err });
    }
    this.probed = seg;
  }

  /** `seg`'s handle, reopened if `maxOpenFiles` closed it. */
  private fileOf(seg: Segment): FileHandle {
    try {
      return seg.handle(this.host.opts.fs);
    } catch (err) {
      // A handle closed by `maxOpenFiles` cannot be reopened: the file is gone.
      if (isMissing(err)) throw new MissingSegment();
      throw new IOError(`cannot open segment ${seg.seq}: ${(err as Error)?.message ?? err}`, { cause: err });
    }
  }

  private read(seg: Segment, buf: Uint8Array, pos: number): number {
    const fh = this.fileOf(seg);
    try {
      return fh.pread(buf, pos);
    } catch (err) {
      // Not damage: nothing is dropped and the cursor stays for a retry.
      throw new IOError(`read of segment ${seg.seq} at ${pos} failed: ${(err as Error)?.message ?? err}`, { cause: err });
    }
  }
}

/** A segment's file no longer exists. */
class MissingSegment extends Error {}

function isMissing(err: unknown): boolean {
  return (err as NodeJS.ErrnoException)?.code === 'ENOENT';
}
