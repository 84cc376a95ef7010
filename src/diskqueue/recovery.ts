/**
 * Opening a directory: one header read per segment, and no record reads
 * except for segments already known to be damaged (seed 000, "Crash recovery
 * and corruption"). Damage never fails the open: it becomes a counted loss
 * event, reported once by the next consuming read. An I/O or permission error
 * does fail the open, and then nothing has been deleted.
 *
 * The work is two passes: a read-only survey (which can still refuse the open,
 * e.g. on a segment-size mismatch), then the repairs it decided on.
 */
import { join } from 'node:path';
import type { FileHandle, FileSystem } from '../storage/fs.js';
import { listSegments, segmentFileName } from '../storage/segment-names.js';
import { CorruptError, IOError, SegmentSizeMismatchError } from '../errors.js';
import { decodeHeader, HEADER_SIZE, FLAG_OVERSIZED, type SegmentHeader, type HeaderFault } from './format.js';
import { Segment, walkRecords, type WalkResult } from './segment.js';

/** Loss counters found at open. */
export interface RecoveryCounts {
  corruptions: number;
  lostBytes: number;
  lostRecords: number;
  lostSegments: number;
  foreignSegments: number;
}

export interface Recovered {
  segments: Segment[];
  /** One per loss event, to be thrown by the next consuming reads. */
  events: CorruptError[];
  counts: RecoveryCounts;
  /** Writes the repairs need flushed before the open resolves. */
  repaired: Segment[];
}

/**
 * What the read-only pass learned about one segment. `walk` and `zero` are
 * the record reads a damaged segment needs, done in that pass too, so an I/O
 * error in them still fails the open before anything is deleted.
 */
type Survey = { seq: number; fh: FileHandle | undefined; size: number; walk?: WalkResult; zero?: boolean } & (
  | { kind: 'ok'; header: SegmentHeader }
  | { kind: 'torn'; header: SegmentHeader }
  | { kind: 'empty' | 'bad' | 'foreign'; fault: HeaderFault | 'insane' }
);

function sane(h: SegmentHeader, size: number): boolean {
  const limit = HEADER_SIZE + h.capacity;
  return (
    h.capacity > 0 &&
    h.writeCursor >= HEADER_SIZE &&
    h.writeCursor <= limit &&
    h.commitCursor >= HEADER_SIZE &&
    h.commitCursor <= h.writeCursor &&
    h.committedCount <= h.writtenCount &&
    ((h.flags & FLAG_OVERSIZED) !== 0 || h.capacity === h.segmentSize) &&
    size >= 0
  );
}

function survey(fs: FileSystem, dir: string, seq: number): Survey {
  const path = join(dir, segmentFileName(seq));
  let fh: FileHandle;
  try {
    fh = fs.open(path, 'rw');
  } catch (err) {
    throw new IOError(`cannot open segment ${path}`, { cause: err });
  }
  try {
    const size = fh.size();
    const buf = new Uint8Array(HEADER_SIZE);
    const n = fh.pread(buf, 0);
    if (size === 0) return { seq, fh, size, kind: 'empty', fault: 'zero' };
    const res = decodeHeader(buf.subarray(0, n));
    if (res.ok) {
      return sane(res.header, size)
        ? { seq, fh, size, kind: 'ok', header: res.header }
        : { seq, fh, size, kind: 'bad', fault: 'insane' };
    }
    if (res.fault === 'zero') return { seq, fh, size, kind: 'empty', fault: 'zero' };
    if (res.fault === 'version') return { seq, fh, size, kind: 'foreign', fault: 'version' };
    if (res.fault === 'checksum' && res.header) return { seq, fh, size, kind: 'torn', header: res.header };
    return { seq, fh, size, kind: 'bad', fault: res.fault };
  } catch (err) {
    fh.close();
    throw new IOError(`cannot read segment ${path}`, { cause: err });
  }
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

/** The record reads a segment's repair will need (read-only). */
function inspect(s: Survey & { fh: FileHandle }, last: boolean): void {
  if (s.kind === 'empty' || s.kind === 'bad') {
    if (last && s.size > 0 && (s.kind === 'empty' || s.fault === 'short')) s.zero = allZero(s.fh, s.size);
    if (s.size > HEADER_SIZE) s.walk = walkRecords(s.fh, HEADER_SIZE, s.size);
  } else if (s.kind === 'torn') {
    s.walk = walkRecords(s.fh, HEADER_SIZE, s.size);
  } else if (s.kind === 'ok' && s.size < s.header.writeCursor) {
    // Past a bad payload whose next record holds, so a cut file keeps every intact record before the cut.
    s.walk = walkRecords(s.fh, HEADER_SIZE, Math.min(s.size, HEADER_SIZE + s.header.capacity), { resync: true });
  }
}

/**
 * Loads every segment in `dir`. Throws {@link SegmentSizeMismatchError} or
 * {@link IOError} before changing anything; otherwise repairs what it must and
 * returns the live segments in order.
 */
export function recover(fs: FileSystem, dir: string, segmentSize: number): Recovered {
  const surveyed: Survey[] = [];
  // One descriptor at a time: a deep queue must open under `maxOpenFiles`
  // (and the process's own limit), so each survey's handle is closed before
  // the next segment is opened, and the segments reopen theirs on demand.
  try {
    const seqs = listSegments(fs.readdir(dir));
    seqs.forEach((seq, i) => {
      const s = survey(fs, dir, seq);
      try {
        if (s.kind === 'ok' && s.header.segmentSize !== segmentSize) {
          throw new SegmentSizeMismatchError(s.header.segmentSize, segmentSize);
        }
        inspect(s as Survey & { fh: FileHandle }, i === seqs.length - 1);
      } finally {
        s.fh!.close();
        s.fh = undefined;
      }
      surveyed.push(s);
    });
  } catch (err) {
    throw err instanceof IOError || err instanceof SegmentSizeMismatchError ? err : new IOError(`cannot open ${dir}`, { cause: err });
  }

  const counts: RecoveryCounts = { corruptions: 0, lostBytes: 0, lostRecords: 0, lostSegments: 0, foreignSegments: 0 };
  const events: CorruptError[] = [];
  const segments: Segment[] = [];
  const repaired: Segment[] = [];
  let replayFromHere = false;
  const drop = (s: Survey) => {
    fs.unlink(join(dir, segmentFileName(s.seq)));
  };

  surveyed.forEach((s, i) => {
    const last = i === surveyed.length - 1;
    const path = join(dir, segmentFileName(s.seq));
    if (s.kind === 'empty' || s.kind === 'bad') {
      // A zero-length or all-zero last segment never held a record: its
      // creation was cut short. Anywhere else, or with any byte set (a zeroed
      // header with records behind it), it is loss.
      if (last && (s.size === 0 || s.zero)) {
        drop(s);
        return;
      }
      // The header cannot say what the segment held; the records that still
      // vouch for themselves can, so they are what the loss is counted in.
      const lostRecords = s.walk?.count ?? 0;
      counts.corruptions++;
      counts.lostSegments++;
      counts.lostBytes += s.size;
      counts.lostRecords += lostRecords;
      events.push(new CorruptError({ segment: s.seq, position: 0, reason: `segment-${s.fault}`, lostBytes: s.size, lostRecords }));
      drop(s);
      return;
    }
    if (s.kind === 'foreign') {
      counts.foreignSegments++;
      drop(s);
      return;
    }
    if (s.kind !== 'ok' && s.kind !== 'torn') return;
    const h = s.header;
    if (s.kind === 'torn') {
      // Only the header was lost: rebuild it from the records, which vouch for
      // themselves. The commit position cannot be rebuilt, so replay from here.
      const capacity = Math.max(0, s.size - HEADER_SIZE);
      const walk = s.walk!;
      const oversized = capacity !== segmentSize;
      const seg = new Segment(s.seq, path, undefined, capacity, oversized ? FLAG_OVERSIZED : 0, segmentSize, walk.end, walk.count, HEADER_SIZE, 0);
      seg.headerDirty = true;
      seg.sealed = !last;
      repaired.push(seg);
      segments.push(seg);
      replayFromHere = true;
      // The walk stops at the first damaged record. What lay behind it is only
      // known from the torn header's own cursors and counts, each believed on
      // its own when it is consistent with the walk (a torn rewrite leaves
      // each field either old or new, and neither undercounts what the walk
      // proved; a field damaged in place usually fails that test). Records
      // behind the walk that were already committed are not owed to anyone.
      const writeOk = h.writeCursor >= walk.end && h.writeCursor <= HEADER_SIZE + capacity;
      const countOk = h.writtenCount >= walk.count && h.writtenCount <= capacity;
      const owedFrom = writeOk && h.commitCursor <= h.writeCursor ? Math.max(walk.end, h.commitCursor) : walk.end;
      const owedCount = countOk && h.committedCount <= h.writtenCount ? Math.max(walk.count, h.committedCount) : walk.count;
      const lostBytes = writeOk ? h.writeCursor - owedFrom : 0;
      const lostRecords = countOk ? h.writtenCount - owedCount : 0;
      counts.corruptions++;
      counts.lostBytes += lostBytes;
      counts.lostRecords += lostRecords;
      events.push(new CorruptError({ segment: s.seq, position: 0, reason: 'header-rebuilt', lostBytes, lostRecords }));
      return;
    }
    const seg = new Segment(s.seq, path, undefined, h.capacity, h.flags, h.segmentSize, h.writeCursor, h.writtenCount, h.commitCursor, h.committedCount);
    seg.sealed = !last;
    if (s.size < h.writeCursor) {
      // Truncated underneath us: keep what survives, count what does not.
      const walk = s.walk!;
      // Damaged records inside the walk stay for the reader to report one by one.
      const kept = walk.count + walk.damaged;
      // Records past the cut that were already committed are not owed to anyone.
      const lostRecords = Math.max(0, h.writtenCount - Math.max(kept, h.committedCount));
      const lostBytes = h.writeCursor - Math.max(walk.end, h.commitCursor);
      seg.writeCursor = seg.end = walk.end;
      seg.writtenCount = seg.endCount = kept;
      if (seg.commitCursor > walk.end) {
        seg.commitCursor = walk.end;
        seg.committedCount = kept;
      }
      seg.committedCount = Math.min(seg.committedCount, kept);
      seg.readCount = seg.committedCount;
      seg.sealed = true;
      seg.headerDirty = true;
      repaired.push(seg);
      counts.corruptions++;
      counts.lostBytes += lostBytes;
      counts.lostRecords += lostRecords;
      events.push(new CorruptError({ segment: s.seq, position: walk.end, reason: 'truncated', lostBytes, lostRecords }));
    }
    if (replayFromHere && seg.commitCursor !== HEADER_SIZE) {
      seg.commitCursor = HEADER_SIZE;
      seg.committedCount = 0;
      seg.readCount = 0;
      seg.headerDirty = true;
      repaired.push(seg);
    }
    segments.push(seg);
  });
  return { segments, events, counts, repaired };
}
