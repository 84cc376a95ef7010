/**
 * Opening a directory: one header read per segment, and no record reads
 * except for segments already known to be damaged (the Go diskqueue, "Crash recovery
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
import { CorruptError, IOError, SegmentSizeMismatchError, type CorruptReason } from '../errors.js';
import { decodeHeader, HEADER_SIZE, FLAG_OVERSIZED, type SegmentHeader, type HeaderFault } from './format.js';
import { Segment, walkRecords, dataEnd, type WalkResult } from './segment.js';
import { estimateLostSegment, type LossEstimate } from './loss-estimate.js';

/** Loss counters found at open. */
export interface RecoveryCounts {
  corruptions: number;
  lostBytes: number;
  lostRecords: number;
  lostSegments: number;
  foreignSegments: number;
  /** Bytes of the foreign segments dropped. */
  foreignBytes: number;
  /** Bytes past what a header published (adds that never resolved), discarded rather than lost. */
  discardedBytes: number;
}

export interface Recovered {
  segments: Segment[];
  /** One per loss event, to be thrown by the next consuming reads. */
  events: CorruptError[];
  counts: RecoveryCounts;
  /** Writes the repairs need flushed before the open resolves. */
  repaired: Segment[];
  /** Highest segment number found, kept or dropped (0 when none): new segments are numbered above it. */
  highestSeq: number;
  /**
   * Files to remove. The open removes them only after it created any segment
   * it owes, so a dropped number is never free for reuse on disk.
   */
  doomed: string[];
  /**
   * A segment numbered above every kept one was dropped for damage or a
   * foreign version: the open creates the next segment at once, so the
   * directory itself (not only this process) remembers that number as used.
   */
  droppedAbove: boolean;
}

/**
 * What the read-only pass learned about one segment. `walk`, `zero` and
 * `tail` are the record reads a damaged (or uncleanly closed) segment needs,
 * done in that pass too, so an I/O error in them still fails the open before
 * anything is deleted.
 */
type Survey = { seq: number; fh: FileHandle | undefined; size: number; walk?: WalkResult; zero?: boolean; tail?: number } & (
  | { kind: 'ok'; header: SegmentHeader }
  | { kind: 'torn'; header: SegmentHeader }
  | { kind: 'empty' | 'bad' | 'foreign'; fault: HeaderFault | 'insane' }
);

/** Bytes past a tail segment's write cursor read at open to tell slack from a torn tail. */
const TAIL_PROBE = 4096;

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
    throw new IOError(`cannot open segment ${path}: ${(err as Error)?.message ?? err}`, { cause: err });
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
    throw new IOError(`cannot read segment ${path}: ${(err as Error)?.message ?? err}`, { cause: err });
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
    if (s.size > HEADER_SIZE) {
      // The header is gone; the records that still vouch for themselves are
      // what can be salvaged, and any bytes behind them are what cannot.
      s.walk = walkRecords(s.fh, HEADER_SIZE, s.size);
      s.tail = dataEnd(s.fh, s.walk.end, s.size);
    }
  } else if (s.kind === 'torn') {
    s.walk = walkRecords(s.fh, HEADER_SIZE, s.size);
  } else if (s.kind === 'ok' && s.size < s.header.writeCursor) {
    // Past a bad payload whose next record holds, so a cut file keeps every intact record before the cut.
    s.walk = walkRecords(s.fh, HEADER_SIZE, Math.min(s.size, HEADER_SIZE + s.header.capacity), { resync: true });
  } else if (s.kind === 'ok' && last) {
    // Records written past the published cursor belong to adds that never
    // resolved. A clean close leaves zeros there, so one small read tells;
    // only an unclean one pays for reading the rest of the tail.
    const wc = s.header.writeCursor;
    const to = Math.min(s.size, HEADER_SIZE + s.header.capacity);
    if (dataEnd(s.fh, wc, Math.min(to, wc + TAIL_PROBE)) > wc) s.tail = dataEnd(s.fh, wc, to);
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
    throw err instanceof IOError || err instanceof SegmentSizeMismatchError ? err : new IOError(`cannot open ${dir}: ${(err as Error)?.message ?? err}`, { cause: err });
  }

  const counts: RecoveryCounts = {
    corruptions: 0,
    lostBytes: 0,
    lostRecords: 0,
    lostSegments: 0,
    foreignSegments: 0,
    foreignBytes: 0,
    discardedBytes: 0,
  };
  const events: CorruptError[] = [];
  const segments: Segment[] = [];
  const repaired: Segment[] = [];
  const doomed: string[] = [];
  /** Numbers of segments dropped for damage or a foreign version (not the silent creation-cut removals). */
  const droppedLoud: number[] = [];
  let replayFromHere = false;
  /** Every segment so far is fully committed: a gap behind them is what reclaim (or a failed unlink of it) leaves. */
  let retiredSoFar = true;

  const loss = (ev: CorruptError, lostBytes: number, lostRecords: number, lostSegments = 0) => {
    counts.corruptions++;
    counts.lostBytes += lostBytes;
    counts.lostRecords += lostRecords;
    counts.lostSegments += lostSegments;
    events.push(ev);
  };
  // A segment whose bytes are gone is estimated from the one before it (a
  // sealed segment is full, and records tend to be alike), or from the one
  // after it; failing both, one record in a segment's worth of bytes. It held
  // at least one record: segments are only created for one.
  const estimate = (next?: Survey): LossEstimate => {
    const after = next?.kind === 'ok' ? { oversized: (next.header.flags & FLAG_OVERSIZED) !== 0, ...next.header } : undefined;
    return estimateLostSegment([...segments].reverse(), after, segmentSize);
  };
  /**
   * Gives `seg` its file's full capacity back when the file was found short:
   * the tail is extended (as the Go diskqueue does) and keeps taking appends;
   * a sealed segment keeps its length and reports it.
   */
  const fit = (seg: Segment, size: number) => {
    if (size >= seg.limit) return;
    if (!seg.sealed) {
      try {
        seg.handle(fs).allocate(seg.limit);
        return;
      } catch {
        seg.sealed = true; // no room to extend: the next add rolls instead
      }
    }
    seg.fileSize = size;
  };
  /** Overwrites `[from, to)` of `seg` with zeros, so bytes no header vouches for can never be walked into later. */
  const zero = (seg: Segment, from: number, to: number) => {
    const fh = seg.handle(fs);
    const block = new Uint8Array(Math.min(1 << 20, Math.max(0, to - from)));
    for (let pos = from; pos < to; pos += block.length) fh.pwrite(block.subarray(0, Math.min(block.length, to - pos)), pos, 'record');
    seg.dataDirty = true;
  };
  /** A segment rebuilt from a checksum-verified walk of its records, replaying from its start. */
  const rebuild = (s: Survey, walk: WalkResult, last: boolean): Segment => {
    const dataLen = Math.max(0, s.size - HEADER_SIZE);
    const oversized = dataLen > segmentSize;
    const capacity = oversized ? dataLen : segmentSize;
    const path = join(dir, segmentFileName(s.seq));
    const seg = new Segment(s.seq, path, undefined, capacity, oversized ? FLAG_OVERSIZED : 0, segmentSize, walk.end, walk.count, HEADER_SIZE, 0);
    seg.headerDirty = true;
    seg.sealed = !last || oversized;
    fit(seg, s.size);
    repaired.push(seg);
    segments.push(seg);
    return seg;
  };

  surveyed.forEach((s, i) => {
    const last = i === surveyed.length - 1;
    const path = join(dir, segmentFileName(s.seq));

    // Numbers are consecutive and reclaim removes only from the head, so a
    // missing number is a lost segment, unless everything before it was
    // committed (reclaim removed it and could not remove the ones before).
    const prev = surveyed[i - 1];
    // A run of missing numbers is one event, however long: a stray file
    // numbered far above the rest must cost one report, not one per number.
    const missing = prev ? s.seq - prev.seq - 1 : 0;
    if (missing > 0 && !retiredSoFar) {
      const e = estimate(s);
      const first = prev!.seq + 1;
      const what = missing === 1 ? `segment ${first}` : `segments ${first} to ${s.seq - 1}`;
      const ev = new CorruptError(
        { segment: first, position: 0, reason: 'segment-missing', lostBytes: e.bytes * missing, lostRecords: e.records * missing },
        `corrupt data (segment-missing): ${what} missing between segments ${prev!.seq} and ${s.seq}`,
      );
      loss(ev, e.bytes * missing, e.records * missing, missing);
    }
    retiredSoFar &&= s.kind === 'ok' && s.header.commitCursor >= s.header.writeCursor && s.header.committedCount >= s.header.writtenCount;

    if (s.kind === 'empty' && last) {
      // An all-zero header on the last segment is what a power cut leaves
      // when the segment's creation had not reached the disk: nothing in it
      // was ever published, so nothing in it is owed. Records that made it
      // anyway are kept (they were added, never acknowledged); bytes behind
      // them are discarded, as is a file with none.
      const walk = s.walk;
      if (walk && walk.count > 0) {
        const seg = rebuild(s, walk, true);
        if (s.tail! > walk.end) {
          counts.discardedBytes += s.tail! - walk.end;
          zero(seg, walk.end, s.tail!);
        }
        return;
      }
      if (!s.zero) counts.discardedBytes += Math.max(0, (s.tail ?? s.size) - HEADER_SIZE);
      doomed.push(path);
      return;
    }
    if (s.kind === 'bad' && last && s.zero) {
      doomed.push(path); // shorter than a header and all zeros: created, never written
      return;
    }
    if (s.kind === 'empty' || s.kind === 'bad') {
      const walk = s.walk;
      if (walk && walk.count > 0) {
        // The header is unreadable but the records vouch for themselves:
        // keep them, like a torn header. What lies behind the walk (damaged
        // records, by their bytes; the count is estimated from the records'
        // average size) is the part that cannot be salvaged.
        rebuild(s, walk, last);
        replayFromHere = true;
        const lostBytes = Math.max(0, (s.tail ?? walk.end) - walk.end);
        const lostRecords = lostBytes > 0 ? Math.max(1, Math.round(lostBytes / ((walk.end - HEADER_SIZE) / walk.count))) : 0;
        loss(
          new CorruptError(
            { segment: s.seq, position: 0, reason: 'header-rebuilt', lostBytes, lostRecords },
            `corrupt data (header-rebuilt) in segment ${s.seq}: unreadable header (${s.fault}), ${walk.count} intact records kept`,
          ),
          lostBytes,
          lostRecords,
        );
        return;
      }
      // Nothing in it vouches for itself: the segment is lost, and what it
      // held is estimated.
      const e = estimate(surveyed[i + 1]);
      loss(new CorruptError({ segment: s.seq, position: 0, reason: `segment-${s.fault}` as CorruptReason /* never version (foreign) or checksum (torn) here */, lostBytes: e.bytes, lostRecords: e.records }), e.bytes, e.records, 1);
      doomed.push(path);
      droppedLoud.push(s.seq);
      return;
    }
    if (s.kind === 'foreign') {
      counts.foreignSegments++;
      counts.foreignBytes += s.size;
      doomed.push(path);
      droppedLoud.push(s.seq);
      return;
    }
    if (s.kind !== 'ok' && s.kind !== 'torn') return;
    const h = s.header;
    if (s.kind === 'torn') {
      // Only the header was lost: rebuild it from the records, which vouch for
      // themselves.
      const walk = s.walk!;
      const seg = rebuild(s, walk, last);
      // A header whose checksum fails vouches for none of its fields: a
      // commit position that lands on a record boundary may still be one
      // further on than consumption ever got (a damaged field, or a torn
      // rewrite whose new commit half reached the disk before the records
      // it covers were delivered), and believing it would skip the records
      // in between without a word. So this segment and every later one
      // replay from their first record, as the Go diskqueue does: records
      // already acknowledged may come again (at-least-once allows that),
      // none goes missing. The event below is the one count of it.
      replayFromHere = true;
      // The walk stops at the first damaged record. What lay behind it is only
      // known from the torn header's own cursors and counts, each believed on
      // its own when it is consistent with the walk (a torn rewrite leaves
      // each field either old or new, and neither undercounts what the walk
      // proved; a field damaged in place usually fails that test). Records
      // behind the walk that were already committed are not owed to anyone.
      const writeOk = h.writeCursor >= walk.end && h.writeCursor <= seg.limit;
      const countOk = h.writtenCount >= walk.count && h.writtenCount <= seg.capacity;
      const owedFrom = writeOk && h.commitCursor <= h.writeCursor ? Math.max(walk.end, h.commitCursor) : walk.end;
      const owedCount = countOk && h.committedCount <= h.writtenCount ? Math.max(walk.count, h.committedCount) : walk.count;
      const lostBytes = writeOk ? h.writeCursor - owedFrom : 0;
      const lostRecords = countOk ? h.writtenCount - owedCount : 0;
      loss(new CorruptError({ segment: s.seq, position: 0, reason: 'header-rebuilt', lostBytes, lostRecords }), lostBytes, lostRecords);
      return;
    }
    const seg = new Segment(s.seq, path, undefined, h.capacity, h.flags, h.segmentSize, h.writeCursor, h.writtenCount, h.commitCursor, h.committedCount);
    seg.sealed = !last || seg.oversized;
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
      seg.headerDirty = true;
      repaired.push(seg);
      // A torn record at the cut is no record: clear it, so appends after it
      // never leave a fragment a later walk could step into.
      if (!seg.sealed && s.size > walk.end) zero(seg, walk.end, s.size);
      loss(new CorruptError({ segment: s.seq, position: walk.end, reason: 'truncated', lostBytes, lostRecords }), lostBytes, lostRecords);
    } else if (s.tail !== undefined && s.tail > h.writeCursor) {
      // A torn tail: records (or parts of them) written after the last
      // header that reached the disk. No add that resolved is among them.
      counts.discardedBytes += s.tail - h.writeCursor;
      zero(seg, h.writeCursor, s.tail);
    }
    fit(seg, s.size);
    if (replayFromHere && seg.commitCursor !== HEADER_SIZE) {
      seg.commitCursor = HEADER_SIZE;
      seg.committedCount = 0;
      seg.readCount = 0;
      seg.headerDirty = true;
      repaired.push(seg);
    }
    segments.push(seg);
  });
  const lastKept = segments[segments.length - 1]?.seq ?? 0;
  return {
    segments,
    events,
    counts,
    repaired,
    highestSeq: surveyed[surveyed.length - 1]?.seq ?? 0,
    doomed,
    droppedAbove: droppedLoud.some((seq) => seq > lastKept),
  };
}
