/**
 * Opening a directory: one header read per segment, and no record reads
 * except for segments already known to be damaged (the Go diskqueue, "Crash recovery
 * and corruption"). Damage never fails the open: it becomes a counted loss
 * event, reported once by the next consuming read. An I/O or permission error
 * does fail the open, and then nothing has been deleted.
 *
 * The work is two passes: the read-only survey (survey.ts), which judges the
 * damage and can still refuse the open (e.g. on a segment-size mismatch),
 * then the repairs its findings call for. Nothing here judges damage itself.
 */
import { join } from 'node:path';
import type { FileSystem } from '../storage/fs.js';
import { listSegments, segmentFileName } from '../storage/segment-names.js';
import { CorruptError, IOError, SegmentSizeMismatchError, type CorruptReason } from '../errors.js';
import { HEADER_SIZE, FLAG_OVERSIZED } from './format.js';
import { Segment, type WalkResult } from './segment.js';
import { openSegment, judgeHeader, surveySegment, surveyLosses, rebuiltGeometry, tornHeaderLoss, type SegmentSurvey } from './survey.js';

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
 * Loads every segment in `dir`. Throws {@link SegmentSizeMismatchError} or
 * {@link IOError} before changing anything; otherwise repairs what the survey
 * found and returns the live segments in order.
 */
export function recover(fs: FileSystem, dir: string, segmentSize: number): Recovered {
  const surveyed: SegmentSurvey[] = [];
  // One descriptor at a time: a deep queue must open under `maxOpenFiles`
  // (and the process's own limit), so each survey's handle is closed before
  // the next segment is opened, and the segments reopen theirs on demand.
  try {
    const seqs = listSegments(fs.readdir(dir));
    seqs.forEach((seq, i) => {
      const { path, fh } = openSegment(fs, dir, seq, 'rw');
      try {
        const head = judgeHeader(fh, path);
        if (head.kind === 'sound' && head.header.segmentSize !== segmentSize) {
          throw new SegmentSizeMismatchError(head.header.segmentSize, segmentSize);
        }
        surveyed.push({ seq, size: head.size, ...surveySegment(fh, head, i === seqs.length - 1) });
      } finally {
        fh.close();
      }
    });
  } catch (err) {
    throw err instanceof IOError || err instanceof SegmentSizeMismatchError ? err : new IOError(`cannot open ${dir}: ${(err as Error)?.message ?? err}`, { cause: err });
  }
  const losses = surveyLosses(surveyed, segmentSize);

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

  const loss = (ev: CorruptError, lostBytes: number, lostRecords: number, lostSegments = 0) => {
    counts.corruptions++;
    counts.lostBytes += lostBytes;
    counts.lostRecords += lostRecords;
    counts.lostSegments += lostSegments;
    events.push(ev);
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
  const rebuild = (s: SegmentSurvey, walk: WalkResult, last: boolean): Segment => {
    const { capacity, oversized } = rebuiltGeometry(s.size, segmentSize);
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
    const { missing, cost } = losses[i]!;
    if (missing) {
      const what = missing.count === 1 ? `segment ${missing.first}` : `segments ${missing.first} to ${missing.last}`;
      const ev = new CorruptError(
        { segment: missing.first, position: 0, reason: 'segment-missing', lostBytes: missing.bytes, lostRecords: missing.records },
        `corrupt data (segment-missing): ${what} missing between segments ${missing.first - 1} and ${s.seq}`,
      );
      loss(ev, missing.bytes, missing.records, missing.count);
    }

    switch (s.kind) {
      case 'unborn': {
        // Nothing in it was ever published, so nothing in it is owed: the
        // records that reached the disk are kept, the rest discarded quietly.
        counts.discardedBytes += s.discardedBytes;
        if (!s.walk) {
          doomed.push(path);
          return;
        }
        const seg = rebuild(s, s.walk, true);
        if (s.discardedBytes > 0) zero(seg, s.walk.end, s.walk.end + s.discardedBytes);
        return;
      }
      case 'salvaged': {
        rebuild(s, s.walk, last);
        replayFromHere = true;
        const ev = new CorruptError(
          { segment: s.seq, position: 0, reason: 'header-rebuilt', lostBytes: s.lostBytes, lostRecords: s.lostRecords },
          `corrupt data (header-rebuilt) in segment ${s.seq}: unreadable header (${s.damage}), ${s.walk.count} intact records kept`,
        );
        loss(ev, s.lostBytes, s.lostRecords);
        return;
      }
      case 'lost': {
        const e = cost!;
        loss(new CorruptError({ segment: s.seq, position: 0, reason: `segment-${s.damage}` as CorruptReason /* never checksum (a torn header) here */, lostBytes: e.bytes, lostRecords: e.records }), e.bytes, e.records, 1);
        doomed.push(path);
        droppedLoud.push(s.seq);
        return;
      }
      case 'foreign':
        counts.foreignSegments++;
        counts.foreignBytes += s.size;
        doomed.push(path);
        droppedLoud.push(s.seq);
        return;
      case 'torn': {
        // Only the header was lost: rebuild it from the records, which vouch
        // for themselves.
        rebuild(s, s.walk, last);
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
        const lost = tornHeaderLoss(s, segmentSize);
        loss(new CorruptError({ segment: s.seq, position: 0, reason: 'header-rebuilt', lostBytes: lost.bytes, lostRecords: lost.records }), lost.bytes, lost.records);
        return;
      }
    }
    const h = s.header;
    const seg = new Segment(s.seq, path, undefined, h.capacity, h.flags, h.segmentSize, h.writeCursor, h.writtenCount, h.commitCursor, h.committedCount);
    seg.sealed = !last || seg.oversized;
    if (s.cut) {
      // Truncated underneath us: keep what survives, count what does not.
      const walk = s.cut;
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
