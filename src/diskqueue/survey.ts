/**
 * The one judgement of a diskqueue directory's damage, made without changing
 * a byte (the Go diskqueue, "Crash recovery and corruption"; docs/FORMAT.md
 * for the bytes). Its two users judge nothing themselves: `DiskQueue.open`
 * (recovery.ts) repairs and books what it finds, `verifyQueue` (verify.ts)
 * reports it, the way Prometheus' WAL repair acts on the reader's corruption
 * error. So an open and a verify of one directory cannot disagree about a
 * header, a gap in the numbering or the cost of a segment lost whole.
 *
 * Per segment it reads the header and then only the records that header
 * calls for: none for a sound segment closed cleanly, a walk where the header
 * cannot be trusted or the file is cut short, and a small probe past the last
 * segment's write cursor. Damage among the records of a sound segment is the
 * drain's to meet (read-cursor.ts), and verify walks for it.
 */
import { join } from 'node:path';
import { IOError } from '../errors.js';
import type { FileHandle, FileSystem, OpenMode } from '../storage/fs.js';
import { segmentFileName } from '../storage/segment-names.js';
import { decodeHeader, HEADER_SIZE, FLAG_OVERSIZED, type HeaderFault, type SegmentHeader } from './format.js';
import { walkRecords, dataEnd, type WalkResult } from './segment.js';
import { estimateLostSegment, type LossEstimate, type SegmentShape } from './loss-estimate.js';

/** Why a header cannot be used at all: a decode fault, or cursors no segment could have (`insane`). */
export type HeaderDamage = Exclude<HeaderFault, 'version'> | 'insane';

/** What one segment's header says, before any record is read. */
export type HeaderVerdict = { size: number } & (
  | { kind: 'sound'; header: SegmentHeader }
  /** The checksum fails: the fields are read but vouch for nothing. */
  | { kind: 'torn'; header: SegmentHeader }
  | { kind: 'unusable'; damage: HeaderDamage }
  /** A format version this code does not know, with a checksum that holds. */
  | { kind: 'foreign' }
);

/** What the survey found in one segment file; each kind names what an open does with it. */
export type SegmentVerdict =
  /**
   * A header to trust. `cut`: the file ends before the write cursor, and this
   * walk (stepping over bad payloads) is what survives. `tail`: on the last
   * segment, one past the last non-zero byte after the write cursor, when
   * there is any (records of adds that never resolved).
   */
  | { kind: 'sound'; header: SegmentHeader; cut?: WalkResult; tail?: number }
  /**
   * A torn header: rebuilt from a walk of the records that stops at the first
   * damaged one, and replayed from its first record. {@link tornHeaderLoss}
   * says what lay behind the walk.
   */
  | { kind: 'torn'; header: SegmentHeader; walk: WalkResult }
  /** An unusable header over records that vouch for themselves: they are kept, the bytes behind them are lost. */
  | { kind: 'salvaged'; damage: HeaderDamage; walk: WalkResult; lostBytes: number; lostRecords: number }
  /**
   * The last segment, whose creation a power cut undid: nothing in it was
   * published, so nothing is owed. `walk`: records that reached the disk
   * anyway, kept (present only when it found some); `discardedBytes`: the
   * bytes that are not kept.
   */
  | { kind: 'unborn'; walk?: WalkResult; discardedBytes: number }
  /** Nothing in it vouches for itself: dropped whole, its cost estimated ({@link surveyLosses}). */
  | { kind: 'lost'; damage: HeaderDamage }
  /** Another format version: dropped, and counted apart from losses. */
  | { kind: 'foreign' };

export type SegmentSurvey = { seq: number; size: number } & SegmentVerdict;

/** A run of segment numbers missing between two segments that reclaim cannot explain. */
export interface MissingRun {
  first: number;
  last: number;
  /** Numbers in the run. */
  count: number;
  /** What the whole run is estimated to have held. */
  bytes: number;
  records: number;
}

/** What a segment costs beyond its own file: a run missing before it, and, when it is `lost`, its estimated contents. */
export interface SegmentLosses {
  missing?: MissingRun;
  cost?: LossEstimate;
}

/** Bytes past a tail segment's write cursor read to tell slack from a torn tail. */
const TAIL_PROBE = 4096;

/** Opens segment `seq` of `dir`. @throws IOError it cannot be opened. */
export function openSegment(fs: FileSystem, dir: string, seq: number, mode: OpenMode): { path: string; fh: FileHandle } {
  const path = join(dir, segmentFileName(seq));
  try {
    return { path, fh: fs.open(path, mode) };
  } catch (err) {
    throw new IOError(`cannot open segment ${path}: ${(err as Error)?.message ?? err}`, { cause: err });
  }
}

/** The error a failed read of a segment's header or records becomes. */
export function segmentReadError(path: string, err: unknown): IOError {
  return new IOError(`cannot read segment ${path}: ${(err as Error)?.message ?? err}`, { cause: err });
}

/**
 * Reads and judges `fh`'s header; no record is read.
 *
 * @throws IOError the file's size or header cannot be read.
 */
export function judgeHeader(fh: FileHandle, path: string): HeaderVerdict {
  try {
    const size = fh.size();
    const buf = new Uint8Array(HEADER_SIZE);
    const n = fh.pread(buf, 0);
    if (size === 0) return { size, kind: 'unusable', damage: 'zero' };
    const res = decodeHeader(buf.subarray(0, n));
    if (res.ok) return sane(res.header) ? { size, kind: 'sound', header: res.header } : { size, kind: 'unusable', damage: 'insane' };
    if (res.fault === 'version') return { size, kind: 'foreign' };
    if (res.fault === 'checksum' && res.header) return { size, kind: 'torn', header: res.header };
    return { size, kind: 'unusable', damage: res.fault };
  } catch (err) {
    throw segmentReadError(path, err);
  }
}

/** The plausibility rules a header whose checksum holds must also pass. */
function sane(h: SegmentHeader): boolean {
  return (
    h.capacity > 0 &&
    h.writeCursor >= HEADER_SIZE &&
    h.writeCursor <= HEADER_SIZE + h.capacity &&
    h.commitCursor >= HEADER_SIZE &&
    h.commitCursor <= h.writeCursor &&
    h.committedCount <= h.writtenCount &&
    ((h.flags & FLAG_OVERSIZED) !== 0 || h.capacity === h.segmentSize)
  );
}

/**
 * Judges one segment from its header's verdict, reading the records that
 * verdict calls for (read-only). `last`: it is the directory's last segment,
 * where a power cut can leave a creation or an append half done.
 * Throws what a read throws, unwrapped.
 */
export function surveySegment(fh: FileHandle, head: HeaderVerdict, last: boolean): SegmentVerdict {
  const size = head.size;
  switch (head.kind) {
    case 'foreign':
      return { kind: 'foreign' };
    case 'torn':
      return { kind: 'torn', header: head.header, walk: walkRecords(fh, HEADER_SIZE, size) };
    case 'sound': {
      const h = head.header;
      const to = Math.min(size, HEADER_SIZE + h.capacity);
      // Past a bad payload whose next record holds, so a cut file keeps every intact record before the cut.
      if (size < h.writeCursor) return { kind: 'sound', header: h, cut: walkRecords(fh, HEADER_SIZE, to, { resync: true }) };
      if (!last) return { kind: 'sound', header: h };
      // Records written past the published cursor belong to adds that never
      // resolved. A clean close leaves zeros there, so one small read tells;
      // only an unclean one pays for reading the rest of the tail.
      const wc = h.writeCursor;
      const tail = dataEnd(fh, wc, Math.min(to, wc + TAIL_PROBE)) > wc ? dataEnd(fh, wc, to) : undefined;
      return { kind: 'sound', header: h, tail };
    }
  }
  const damage = head.damage;
  const mayBeUnborn = last && (damage === 'zero' || damage === 'short');
  // Created and never written: all zeros (or nothing), so there is nothing to walk.
  if (mayBeUnborn && (size === 0 || allZero(fh, size))) return { kind: 'unborn', discardedBytes: 0 };
  // The header is gone; the records that still vouch for themselves are
  // what can be salvaged, and any bytes behind them are what cannot.
  const walk = size > HEADER_SIZE ? walkRecords(fh, HEADER_SIZE, size) : undefined;
  const tail = walk ? dataEnd(fh, walk.end, size) : size;
  const kept = walk && walk.count > 0 ? walk : undefined;
  // An all-zero header on the last segment is what a power cut leaves when
  // the segment's creation had not reached the disk. Records that made it
  // anyway are kept (added, never acknowledged); bytes behind them are not.
  if (last && damage === 'zero') {
    return kept ? { kind: 'unborn', walk: kept, discardedBytes: tail - kept.end } : { kind: 'unborn', discardedBytes: Math.max(0, tail - HEADER_SIZE) };
  }
  if (!kept) return { kind: 'lost', damage };
  // What lies behind the walk is counted by its bytes; its records are
  // estimated from the average size of the ones kept.
  const lostBytes = Math.max(0, tail - kept.end);
  const lostRecords = lostBytes > 0 ? Math.max(1, Math.round(lostBytes / ((kept.end - HEADER_SIZE) / kept.count))) : 0;
  return { kind: 'salvaged', damage, walk: kept, lostBytes, lostRecords };
}

/** Whether every byte of a file is zero (a segment created but never written). */
function allZero(fh: FileHandle, size: number): boolean {
  const buf = new Uint8Array(Math.min(size, 1 << 20));
  for (let pos = 0; pos < size; pos += buf.length) {
    const n = fh.pread(buf, pos);
    for (let i = 0; i < n; i++) if (buf[i] !== 0) return false;
    if (n === 0) break;
  }
  return true;
}

/**
 * The geometry a segment rebuilt from its records gets: the store's segment
 * size, unless its data region is larger (a segment sized for one record).
 */
export function rebuiltGeometry(size: number, segmentSize: number): { capacity: number; oversized: boolean } {
  const dataLen = Math.max(0, size - HEADER_SIZE);
  const oversized = dataLen > segmentSize;
  return { capacity: oversized ? dataLen : segmentSize, oversized };
}

/**
 * What lay behind the walk of a torn segment and was still owed. It is only
 * known from the torn header's own cursors and counts, each believed on its
 * own when it is consistent with the walk (a torn rewrite leaves each field
 * either old or new, and neither undercounts what the walk proved; a field
 * damaged in place usually fails that test). Records behind the walk that
 * were already committed are not owed to anyone.
 */
export function tornHeaderLoss(s: { size: number; header: SegmentHeader; walk: WalkResult }, segmentSize: number): LossEstimate {
  const { header: h, walk } = s;
  const { capacity } = rebuiltGeometry(s.size, segmentSize);
  const writeOk = h.writeCursor >= walk.end && h.writeCursor <= HEADER_SIZE + capacity;
  const countOk = h.writtenCount >= walk.count && h.writtenCount <= capacity;
  const owedFrom = writeOk && h.commitCursor <= h.writeCursor ? Math.max(walk.end, h.commitCursor) : walk.end;
  const owedCount = countOk && h.committedCount <= h.writtenCount ? Math.max(walk.count, h.committedCount) : walk.count;
  return { bytes: writeOk ? h.writeCursor - owedFrom : 0, records: countOk ? h.writtenCount - owedCount : 0 };
}

/**
 * What each segment costs beyond its own file, in segment order: a run of
 * missing numbers before it (one entry however long the run, so a stray high
 * number costs one report), and, for a segment lost whole, what it held.
 * Both are estimated from the segments an open keeps (loss-estimate.ts).
 *
 * Numbers are consecutive and reclaim removes only from the head, so a
 * missing number is a lost segment, unless everything before it was
 * committed (reclaim removed it and could not remove the ones before).
 */
export function surveyLosses(segments: readonly SegmentSurvey[], segmentSize: number): SegmentLosses[] {
  const kept: SegmentShape[] = [];
  const nearestFirst = function* (): Generator<SegmentShape> {
    for (let i = kept.length - 1; i >= 0; i--) yield kept[i]!;
  };
  const estimate = (next: SegmentSurvey | undefined) => estimateLostSegment(nearestFirst(), next?.kind === 'sound' ? headerShape(next.header) : undefined, segmentSize);
  let retiredSoFar = true;
  return segments.map((s, i) => {
    const out: SegmentLosses = {};
    const prev = segments[i - 1];
    const count = prev ? s.seq - prev.seq - 1 : 0;
    if (count > 0 && !retiredSoFar) {
      const e = estimate(s);
      out.missing = { first: prev!.seq + 1, last: s.seq - 1, count, bytes: e.bytes * count, records: e.records * count };
    }
    retiredSoFar &&= s.kind === 'sound' && s.header.commitCursor >= s.header.writeCursor && s.header.committedCount >= s.header.writtenCount;
    if (s.kind === 'lost') out.cost = estimate(segments[i + 1]);
    const shape = keptShape(s, segmentSize);
    if (shape) kept.push(shape);
    return out;
  });
}

function headerShape(h: SegmentHeader): SegmentShape {
  return { oversized: (h.flags & FLAG_OVERSIZED) !== 0, writtenCount: h.writtenCount, writeCursor: h.writeCursor };
}

/** A segment as the open keeps it (undefined when it drops it): a cut file ends at its walk, a rebuilt header at its records. */
function keptShape(s: SegmentSurvey, segmentSize: number): SegmentShape | undefined {
  switch (s.kind) {
    case 'sound':
      if (!s.cut) return headerShape(s.header);
      return { oversized: (s.header.flags & FLAG_OVERSIZED) !== 0, writtenCount: s.cut.count + s.cut.damaged, writeCursor: s.cut.end };
    case 'torn':
    case 'salvaged':
    case 'unborn':
      if (!s.walk) return undefined;
      return { oversized: rebuiltGeometry(s.size, segmentSize).oversized, writtenCount: s.walk.count, writeCursor: s.walk.end };
    default:
      return undefined;
  }
}
