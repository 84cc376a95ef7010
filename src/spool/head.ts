/**
 * The head of a spool: where delivery stands (the oldest segment and a file
 * position in it). `pop` and `popBatch` read records here, damage found here
 * is stepped past and reported, and commits move the head on, retire the
 * segments it leaves behind and persist it in the cursor file. The spool's
 * counterpart of the DiskQueue's read cursor, talking to the spool through
 * {@link HeadHost}.
 *
 * A record is committed only while it is still the head: a commit names the
 * segment, position and end it was read at, and the rollback epoch of that
 * segment then. A rollback since the pop that cut the record may have put
 * another record at the same position, so a commit of a cut record is a
 * no-op (the record it meant is gone); one that ends below every cut since
 * is the same record and is retired as usual.
 */
import { asIOError, CorruptError, IOError, type CorruptReason, type FerryError } from '../errors.js';
import type { FileSystem } from '../storage/fs.js';
import type { CursorFile } from './cursor.js';
import { FRAME_OVERHEAD, SEGMENT_HEADER_SIZE } from './format.js';
import { Popped } from './popped.js';
import { PoppedRun, type RunPiece } from './popped-run.js';
import { readFrameAt, wholeFramesEnd, type FrameRead } from './read-frame.js';
import { ShortReadError, type SpoolSegment } from './segment.js';

/** What the head needs of its spool. */
export interface HeadHost {
  readonly fs: FileSystem;
  readonly dir: string;
  /** The segments, oldest first: the head is in the first. */
  readonly segments: SpoolSegment[];
  readonly counters: { popped: number; committed: number; lostBytes: number; lostSegments: number };
  /** Writes the frames `appendNoSync` staged, so a read sees them. */
  writeStaged(): void;
  /** Closes a segment's descriptor unless the spool still uses it often. */
  release(seg: SpoolSegment): void;
  /** The head stepped past damage: wakes `signal()`. */
  skipped(): void;
  /** The commit handed out with a record: a no-op after close, and it waits its turn behind a requeue. */
  commit(seg: object, at: number, next: number, epoch: number): Promise<void>;
}

/** What {@link Head.gather} collected: see there. */
interface Gathered {
  /** The first record as `pop` returned it, when the batch starts at the head. */
  first: Popped | undefined;
  copy: Uint8Array;
  /** Per record (`first` included): its payload's position in `copy`, its length, its segment's index, its file position. */
  recPos: number[];
  recLen: number[];
  recSeg: number[];
  recAt: number[];
}

export class Head {
  /** Resolves once every retired segment's unlink has completed and a directory sync after it; never rejects. */
  retired: Promise<void> = Promise.resolve();

  constructor(
    private readonly host: HeadHost,
    /** File position of the head in the first segment. */
    public offset: number,
    /** Loss found at open, each handed to one later pop as its error. */
    private readonly events: FerryError[],
    private readonly cursor: CursorFile,
  ) {}

  /**
   * The record at the head, or undefined when there is none. Damage at the
   * head is stepped past (and counted) before its error is thrown, so the
   * next pop makes progress.
   *
   * @throws CorruptError, IOError as `Spool.pop` documents.
   */
  pop(): Popped | undefined {
    this.host.writeStaged();
    const event = this.events.shift();
    if (event) throw event;
    const segs = this.host.segments;
    for (;;) {
      const h = segs[0];
      if (!h) return undefined; // a rollback removed every segment and none could be created
      if (this.offset >= h.size) {
        if (segs.length === 1) return undefined;
        this.retire();
        continue;
      }
      const at = this.offset;
      const own = h.ownFrame(at);
      if (own) return this.handOut(h, at, { payload: own, next: at + FRAME_OVERHEAD + own.length });
      let f: FrameRead;
      try {
        f = readFrameAt(h, at);
      } catch (err) {
        if (err instanceof ShortReadError) throw this.dropSegment(h, 'short');
        if ((err as { code?: string }).code === 'ENOENT') {
          this.dropSegment(h, 'missing');
          throw new IOError(`spool segment ${h.path} is gone; skipped`, { cause: err });
        }
        throw asIOError(`cannot read spool segment ${h.path}`, err);
      }
      if (f.kind === 'partial') throw this.dropSegment(h, 'short');
      if (f.kind === 'length') throw this.dropSegment(h, 'length');
      if (f.kind === 'checksum') {
        // A bad checksum with a framing that still walks to the end of the
        // file costs this frame; otherwise the length itself may be what is
        // damaged, and nothing after it can be trusted.
        let end: number;
        try {
          end = wholeFramesEnd(h, f.next);
        } catch (err) {
          if (err instanceof ShortReadError) throw this.dropSegment(h, 'short');
          throw asIOError(`cannot read spool segment ${h.path}`, err);
        }
        if (end !== h.size) throw this.dropSegment(h, 'checksum');
        throw this.dropFrame(h, f.next);
      }
      return this.handOut(h, at, f);
    }
  }

  /**
   * Up to `max` records (and about `maxBytes`) from the head, or from right
   * after `after` while that is still ahead of the head. Only the first
   * record of a batch from the head reports damage; the rest stop before it.
   *
   * @throws as {@link pop}, for the first record of a batch from the head only.
   */
  popBatch(max: number, maxBytes: number, after: Popped | undefined): Popped[] {
    const g = this.gather(max, maxBytes, after);
    if (!g) return [];
    const out: Popped[] = g.first ? [g.first] : [];
    const segs = this.host.segments;
    for (let k = out.length; k < g.recLen.length; k++) {
      const pos = g.recPos[k]!;
      const n = g.recLen[k]!;
      out.push(this.handOutCopy(segs[g.recSeg[k]!]!, g.recAt[k]!, g.recAt[k]! + FRAME_OVERHEAD + n, g.copy.subarray(pos, pos + n)));
    }
    return out;
  }

  /**
   * The records {@link popBatch} would return, as one {@link PoppedRun}: the
   * same copy of their bytes, with no object or view per record. Undefined
   * when there are none.
   *
   * @throws as {@link popBatch}.
   */
  popRun(max: number, maxBytes: number, after: Popped | undefined): PoppedRun | undefined {
    const g = this.gather(max, maxBytes, after);
    const n = g ? g.recLen.length : 0;
    if (!g || n === 0) return undefined; // nothing at the head, or nothing whole after `after`
    const segs = this.host.segments;
    // The records by segment, for the commit.
    const pieces: RunPiece[] = [];
    let seg: SpoolSegment | undefined;
    let ats: number[] = [];
    let end = 0;
    for (let k = 0; k < n; k++) {
      const s = segs[g.recSeg[k]!]!;
      if (s !== seg) {
        if (seg) pieces.push({ segment: seg, epoch: seg.epoch, ats, end });
        seg = s;
        ats = [];
      }
      ats.push(g.recAt[k]!);
      end = g.recAt[k]! + FRAME_OVERHEAD + g.recLen[k]!;
    }
    pieces.push({ segment: seg!, epoch: seg!.epoch, ats, end });
    // `first` was counted by `pop`.
    this.host.counters.popped += g.first ? n - 1 : n;
    // The run's last record, for a later pop to start after (a view, not a copy of its own).
    const pos = g.recPos[n - 1]!;
    const last = g.first && n === 1 ? g.first : new Popped(g.copy.subarray(pos, pos + g.recLen[n - 1]!), this.host, seg!.seq, g.recAt[n - 1]!, end, seg!.epoch, seg!);
    return new PoppedRun(g.copy, g.recPos, g.recLen, last, pieces);
  }

  /**
   * What {@link popBatch} and {@link popRun} hand out: every record as a
   * position in one copy of their bytes, from the head or from after
   * `after`; when the batch starts at the head, its first record also as
   * the `Popped` that {@link pop} returned (it reports damage there).
   * Undefined when there is no record at the head.
   */
  private gather(max: number, maxBytes: number, after: Popped | undefined): Gathered | undefined {
    const segs = this.host.segments;
    let i = after ? this.aheadOfHead(after) : -1;
    let first: Popped | undefined;
    let bytes = 0;
    let at: number;
    if (i >= 0) {
      this.host.writeStaged();
      at = after!.next;
    } else {
      first = this.pop();
      if (!first) return undefined;
      i = 0;
      at = first.next;
    }
    // Payloads are views into read-ahead windows, which a refill replaces and
    // never overwrites, or into the runs this process wrote, which nothing
    // writes into again: they stay valid until copied, below. Frames that
    // lie back to back in one buffer form a span, copied with one `set`
    // (frame headers included): a copy per record cost more than the rest
    // of the pop. Numbers in arrays rather than an object per record.
    const spanBufs: ArrayBufferLike[] = [];
    const spanFrom: number[] = [];
    const spanTo: number[] = [];
    /** Per record: its span, its payload's byte offset in that span's buffer, its length, its segment index and file position. */
    const recSpan: number[] = [];
    const recOff: number[] = [];
    const recLen: number[] = [];
    const recSeg: number[] = [];
    const recAt: number[] = [];
    if (first) {
      // Record 0, in the copy of its own `pop` made: a span of its own.
      const d = first.data;
      spanBufs.push(d.buffer);
      spanFrom.push(d.byteOffset);
      spanTo.push(d.byteOffset + d.length);
      recSpan.push(0);
      recOff.push(d.byteOffset);
      recLen.push(d.length);
      recSeg.push(segs.indexOf(first.segment as SpoolSegment));
      recAt.push(first.offset);
      bytes = d.length;
    }
    while (recLen.length < max && bytes < maxBytes) {
      let seg = segs[i]!;
      if (at >= seg.size) {
        if (i + 1 >= segs.length) break;
        this.host.release(seg);
        seg = segs[++i]!;
        at = SEGMENT_HEADER_SIZE;
        if (at >= seg.size) continue;
      }
      let buf: ArrayBufferLike;
      let off: number;
      let n: number;
      const own = seg.ownRun(at);
      if (own) {
        buf = own.buffer;
        off = own.byteOffset + seg.ownStart;
        n = seg.ownLength;
      } else {
        let f: FrameRead;
        try {
          f = readFrameAt(seg, at);
        } catch {
          break;
        }
        if (f.kind !== 'ok') break;
        buf = f.payload.buffer;
        off = f.payload.byteOffset;
        n = f.payload.length;
      }
      const last = spanBufs.length - 1;
      if (last >= 0 && spanBufs[last] === buf && spanTo[last]! + FRAME_OVERHEAD === off) {
        spanTo[last] = off + n;
      } else {
        spanBufs.push(buf);
        spanFrom.push(off);
        spanTo.push(off + n);
      }
      recSpan.push(spanBufs.length - 1);
      recOff.push(off);
      recLen.push(n);
      recSeg.push(i);
      recAt.push(at);
      bytes += n;
      at += FRAME_OVERHEAD + n;
    }
    // One buffer for the batch: each record's data is a view into it, instead of an allocation of its own.
    const base: number[] = [];
    let total = 0;
    for (let k = 0; k < spanBufs.length; k++) {
      base.push(total);
      total += spanTo[k]! - spanFrom[k]!;
    }
    const copy = new Uint8Array(total);
    for (let k = 0; k < spanBufs.length; k++) copy.set(new Uint8Array(spanBufs[k]!, spanFrom[k]!, spanTo[k]! - spanFrom[k]!), base[k]!);
    const recPos: number[] = [];
    for (let k = 0; k < recLen.length; k++) {
      const sp = recSpan[k]!;
      recPos.push(base[sp]! + recOff[k]! - spanFrom[sp]!);
    }
    return { first, copy, recPos, recLen, recSeg, recAt };
  }

  /** Whether `p` is the record at the head now, unchanged since it was popped. */
  holds(p: Popped): boolean {
    const h = this.host.segments[0];
    // The segment by identity, as commits compare it: a record of another
    // spool, or of this directory before a reopen, may name the same segment
    // number and offset, and must not move this spool's head.
    return !!h && p.segment === h && this.offset === p.offset && p.next <= h.size && h.intactSince(p.epoch, p.next);
  }

  /** Commits the record read at `at` in `seg` if it is still the head, and writes the cursor when the head moved. */
  commit(seg: SpoolSegment, at: number, next: number, epoch: number): Promise<void> {
    if (!this.moveOn(seg, at, next, epoch)) return Promise.resolve();
    return this.advanced();
  }

  /** Commits each of `popped` in order, as its own commit would, with one cursor write after the last. */
  commitBatch(popped: readonly Popped[]): Promise<void> {
    let moved = false;
    for (const p of popped) {
      if (this.moveOn(p.segment as SpoolSegment, p.offset, p.next, p.epoch)) moved = true;
    }
    return moved ? this.advanced() : Promise.resolve();
  }

  /**
   * Commits every record of `runs` in order, as {@link commitBatch} would
   * commit them one by one, with one cursor write after the last. The
   * records of a piece lie back to back: when the first is the head and no
   * rollback since the pop cut any of them, the head moves past them all at
   * once, which is what moving past each in turn comes to.
   */
  commitRuns(runs: readonly PoppedRun[]): Promise<void> {
    let moved = false;
    for (const run of runs) {
      for (const piece of run.pieces) {
        const seg = piece.segment as SpoolSegment;
        const { ats, end, epoch } = piece;
        if (this.host.segments[0] === seg && this.offset === ats[0] && end <= seg.size && seg.intactSince(epoch, end)) {
          this.offset = end;
          this.host.counters.committed += ats.length;
          seg.forgetBelow(end);
          this.retireConsumed();
          moved = true;
          continue;
        }
        for (let k = 0; k < ats.length; k++) {
          if (this.moveOn(seg, ats[k]!, k + 1 < ats.length ? ats[k + 1]! : end, epoch)) moved = true;
        }
      }
    }
    return moved ? this.advanced() : Promise.resolve();
  }

  /** Deletes the head segment (fully consumed, not the tail) and moves the head to the next one. */
  retire(): void {
    const { fs, dir, segments } = this.host;
    const h = segments.shift()!;
    h.retired = true;
    h.close();
    // Left behind (a failed unlink), it is older than the cursor and is removed at the next open.
    let removed: Promise<void>;
    if (fs.unlinkAsync !== undefined) {
      // On the thread pool: freeing a page-cached segment's pages takes milliseconds.
      removed = fs.unlinkAsync(h.path).catch(() => {});
    } else {
      try {
        fs.unlink(h.path);
      } catch {
        // as above
      }
      removed = Promise.resolve();
    }
    this.offset = SEGMENT_HEADER_SIZE;
    // A retired segment that a power cut brings back, beside a cursor that
    // was never synced, would be delivered again whole; syncing the removal
    // keeps a stale cursor's cost to the segment it points into. Close waits
    // for every removal so far and the directory sync after each.
    const synced = removed.then(() => fs.syncDir(dir)).catch(() => {});
    this.retired = Promise.all([this.retired, synced]).then(() => {});
  }

  /** A rollback cut the segments back: the head must not point past its segment's end. */
  clamp(): void {
    const h = this.host.segments[0];
    if (!h) {
      this.offset = SEGMENT_HEADER_SIZE;
    } else if (this.offset > h.size) {
      // The stored cursor may point past the cut; new frames will fill that
      // space, so it must not be left there.
      this.offset = h.size;
      void this.cursor.write({ seq: h.seq, offset: this.offset });
    }
  }

  /** A copy of the intact frame `f` at `at` in `seg`, with the commit that retires it. */
  private handOut(seg: SpoolSegment, at: number, f: { payload: Uint8Array; next: number }): Popped {
    return this.handOutCopy(seg, at, f.next, f.payload.slice());
  }

  /** A record whose `data` (already a copy the caller may keep) was read at `at` in `seg`, with the commit that retires it. */
  private handOutCopy(seg: SpoolSegment, at: number, next: number, data: Uint8Array): Popped {
    this.host.counters.popped++;
    return new Popped(data, this.host, seg.seq, at, next, seg.epoch, seg);
  }

  /**
   * The index in the segments of the one holding `p` when `p` is still whole
   * and not yet passed by the head (so the records after it are unread by
   * the head); -1 otherwise.
   */
  private aheadOfHead(p: Popped): number {
    const segs = this.host.segments;
    const i = segs.indexOf(p.segment as SpoolSegment);
    if (i < 0) return -1;
    const seg = segs[i]!;
    if (p.next > seg.size || !seg.intactSince(p.epoch, p.next)) return -1;
    if (i === 0 && this.offset > p.offset) return -1;
    return i;
  }

  /**
   * Moves the head past the frame at `at` when it is still the head,
   * retiring a segment it leaves behind; the cursor is not written. Whether
   * it moved.
   */
  private moveOn(seg: SpoolSegment, at: number, next: number, epoch: number): boolean {
    if (this.host.segments[0] !== seg || this.offset !== at || next > seg.size || !seg.intactSince(epoch, next)) return false;
    this.offset = next;
    this.host.counters.committed++;
    seg.forgetBelow(next);
    this.retireConsumed();
    return true;
  }

  /** Retires head segments the head has moved past (never the tail). */
  private retireConsumed(): void {
    const segs = this.host.segments;
    while (segs.length > 1 && this.offset >= segs[0]!.size) this.retire();
  }

  /** The head moved: retire consumed segments and write the cursor. */
  private advanced(): Promise<void> {
    this.retireConsumed();
    return this.cursor.write({ seq: this.host.segments[0]!.seq, offset: this.offset });
  }

  /** Skips the rest of the head segment; returns the error the pop reports. */
  private dropSegment(h: SpoolSegment, reason: CorruptReason): CorruptError {
    const segs = this.host.segments;
    const at = this.offset;
    const lost = h.size - at;
    this.host.counters.lostBytes += lost;
    this.host.counters.lostSegments++;
    this.offset = h.size;
    if (h === segs[segs.length - 1]) h.sealed = true;
    void this.advanced();
    this.host.skipped();
    return new CorruptError({ segment: h.seq, position: at, reason, lostBytes: lost });
  }

  /** Skips one damaged frame ending at `next`; returns the error the pop reports. */
  private dropFrame(h: SpoolSegment, next: number): CorruptError {
    const at = this.offset;
    this.host.counters.lostBytes += next - at;
    this.offset = next;
    void this.advanced();
    this.host.skipped();
    return new CorruptError({ segment: h.seq, position: at, reason: 'checksum', lostBytes: next - at, lostRecords: 1 });
  }
}
