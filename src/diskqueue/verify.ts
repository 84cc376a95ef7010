/**
 * A read-only check of a diskqueue directory: every segment header and every
 * record checksum, without opening the queue. `DiskQueue.open` repairs what it
 * finds (drops bad segments, rewrites headers); this walk only reports, so it
 * can be run on a directory before deciding what to do with it.
 *
 * What it reports mirrors what an open and a full drain would lose (the Go diskqueue,
 * "Crash recovery and corruption"; docs/FORMAT.md for the bytes):
 *
 * | reason                  | found                                               | cost                  |
 * | ----------------------- | --------------------------------------------------- | --------------------- |
 * | `segment-short`         | file shorter than a header                          | the segment           |
 * | `segment-zero`          | all-zero segment that is not the last               | the segment           |
 * | `segment-magic`         | bad magic and no intact record behind it            | the segment           |
 * | `segment-version`       | a format version this code does not know            | the segment           |
 * | `segment-insane`        | impossible cursors and no intact record behind them | the segment           |
 * | `segment-missing`       | a number missing between segments (not reclaimed)   | the segment           |
 * | `header-magic`, `header-zero`, `header-insane` | an unreadable header over intact records (the open salvages them) | the bytes behind the last intact record |
 * | `segment-size-mismatch` | another store geometry than the first segment's     | the open is refused   |
 * | `header-checksum`       | torn header, records intact (the open rebuilds it)  | commit position only  |
 * | `checksum`              | a record's payload fails its checksum               | that record           |
 * | `length`                | a length prefix that is malformed or overruns       | rest of the segment   |
 * | `truncated`             | file ends before the header's write cursor          | rest of the segment   |
 * | `count-mismatch`        | header's written count ≠ records found              | the difference        |
 * | `commit-cursor`         | commit cursor not on a record boundary, or its count wrong | replay/skip    |
 *
 * A zero-length or all-zero last segment, or a last segment whose header is
 * all zeros, is not damage: it is a segment whose creation a power cut undid,
 * and an open removes it (or keeps the records that reached the disk) silently.
 */
import { join, resolve } from 'node:path';
import { IOError } from '../errors.js';
import { nodeFileSystem, type FileHandle, type FileSystem } from '../storage/fs.js';
import { listSegments, segmentFileName } from '../storage/segment-names.js';
import {
  HEADER_SIZE,
  CHECKSUM_SIZE,
  FLAG_OVERSIZED,
  checksumMatches,
  decodeHeader,
  frameRecord,
  readUvarint,
  type SegmentHeader,
} from './format.js';
import { walkRecords, intactRecordAt, dataEnd } from './segment.js';

/** One damaged span found by {@link verifyQueue}. */
export interface VerifyDamage {
  /** Segment number (the `N` of `data.0000000N`). */
  segment: number;
  /** Byte position in the segment file (header included) where the damage starts. */
  position: number;
  /** What was found; see the table in this module's documentation. */
  reason: string;
  /** Bytes an open and drain would lose to it, when known. */
  lostBytes?: number;
  /** Records an open and drain would lose to it, when known. */
  lostRecords?: number;
}

/** What {@link verifyQueue} found. */
export interface VerifyReport {
  /** No damage at all. */
  ok: boolean;
  /** Segment files examined. */
  segments: number;
  /** Intact records found (committed ones included). */
  records: number;
  /** Framed bytes of those records. */
  bytes: number;
  /** Records the headers say are committed (still on disk, not yet reclaimed). */
  committedRecords: number;
  damage: VerifyDamage[];
}

/** Options of {@link verifyQueue}. */
export interface VerifyOptions {
  /** The file-system seam. Default: the real file system. */
  fs?: FileSystem;
  /** Called as the walk advances, with data bytes examined so far and in all. */
  onProgress?(doneBytes: number, totalBytes: number): void;
}

/** A segment after its header was read: how to walk it. */
type Planned =
  | { seq: number; fh: FileHandle; size: number; kind: 'skip' }
  | { seq: number; fh: FileHandle; size: number; kind: 'ok'; header: SegmentHeader }
  | { seq: number; fh: FileHandle; size: number; kind: 'torn'; header?: SegmentHeader };

const BLOCK_SIZE = 1 << 20;

/**
 * Checks every segment and record in `dir` and reports the damage, changing
 * nothing: files are opened read-only. The directory lock is held for the
 * walk, so no writer changes the files under it.
 *
 * @throws LockedError a queue holds the directory.
 * @throws IOError the directory or a segment cannot be listed, opened or read.
 */
export async function verifyQueue(dir: string, opts: VerifyOptions = {}): Promise<VerifyReport> {
  const fs = opts.fs ?? nodeFileSystem;
  const abs = resolve(dir);
  let names: string[];
  try {
    names = fs.readdir(abs);
  } catch (err) {
    throw new IOError(`cannot list ${abs}: ${(err as Error)?.message ?? err}`, { cause: err });
  }
  const lock = fs.lock(abs);
  const plans: Planned[] = [];
  try {
    const report: VerifyReport = { ok: true, segments: 0, records: 0, bytes: 0, committedRecords: 0, damage: [] };
    const seqs = listSegments(names);
    let retiredSoFar = true;
    seqs.forEach((seq, i) => {
      // A number missing between two segments is a lost segment, unless
      // everything before it was committed (then reclaim removed it).
      if (i > 0 && !retiredSoFar) {
        for (let gap = seqs[i - 1]! + 1; gap < seq; gap++) report.damage.push({ segment: gap, position: 0, reason: 'segment-missing' });
      }
      const p = plan(fs, abs, seq, i === seqs.length - 1, report);
      retiredSoFar &&= p.kind === 'ok' && p.header.commitCursor >= p.header.writeCursor && p.header.committedCount >= p.header.writtenCount;
      plans.push(p);
    });
    report.segments = plans.length;

    let total = 0;
    for (const p of plans) total += walkSpan(p);
    let done = 0;
    const progress = async (n: number) => {
      done += n;
      if (opts.onProgress) {
        opts.onProgress(done, total);
        await new Promise((r) => setImmediate(r)); // let a progress display draw
      }
    };

    let geometry: number | undefined;
    for (const p of plans) {
      if (p.kind === 'skip') continue;
      if (p.kind === 'torn') {
        // The open rebuilds this header from a walk that stops at the first bad record.
        const walk = walkRecords(p.fh, HEADER_SIZE, p.size);
        report.records += walk.count;
        report.bytes += walk.end - HEADER_SIZE;
        await progress(walkSpan(p));
        continue;
      }
      geometry ??= p.header.segmentSize;
      if (p.header.segmentSize !== geometry) {
        report.damage.push({ segment: p.seq, position: 0, reason: 'segment-size-mismatch' });
      }
      report.committedRecords += p.header.committedCount;
      await walkSegment(p, report, progress);
    }
    report.ok = report.damage.length === 0;
    return report;
  } finally {
    for (const p of plans) p.fh.close();
    lock.release();
  }
}

/** Data bytes the walk of `p` will read. */
function walkSpan(p: Planned): number {
  if (p.kind === 'skip') return 0;
  if (p.kind === 'torn') return Math.max(0, p.size - HEADER_SIZE);
  return Math.max(0, Math.min(p.size, p.header.writeCursor) - HEADER_SIZE);
}

/** Reads one header and decides how the segment is walked; header damage goes straight into `report`. */
function plan(fs: FileSystem, dir: string, seq: number, last: boolean, report: VerifyReport): Planned {
  const path = join(dir, segmentFileName(seq));
  let fh: FileHandle;
  try {
    fh = fs.open(path, 'r');
  } catch (err) {
    throw new IOError(`cannot open segment ${path}: ${(err as Error)?.message ?? err}`, { cause: err });
  }
  try {
    const size = fh.size();
    const buf = new Uint8Array(HEADER_SIZE);
    const n = fh.pread(buf, 0);
    const whole = (reason: string): Planned => {
      report.damage.push({ segment: seq, position: 0, reason, lostBytes: size });
      return { seq, fh, size, kind: 'skip' };
    };
    if (size === 0) return last ? { seq, fh, size, kind: 'skip' } : whole('segment-zero');
    const res = decodeHeader(buf.subarray(0, n));
    if (res.ok && sane(res.header)) return { seq, fh, size, kind: 'ok', header: res.header };
    if (res.ok) {
      const walk = size > HEADER_SIZE ? walkRecords(fh, HEADER_SIZE, size) : undefined;
      if (!walk || walk.count === 0) return whole('segment-insane');
      const lostBytes = Math.max(0, dataEnd(fh, walk.end, size) - walk.end);
      const lostRecords = lostBytes > 0 ? Math.max(1, Math.round(lostBytes / ((walk.end - HEADER_SIZE) / walk.count))) : 0;
      report.damage.push({ segment: seq, position: 0, reason: 'header-insane', lostBytes, lostRecords });
      return { seq, fh, size, kind: 'torn', header: res.header };
    }
    if ((res.fault === 'zero' || res.fault === 'short') && last && allZero(fh, size)) return { seq, fh, size, kind: 'skip' };
    if (res.fault === 'checksum' && res.header) {
      report.damage.push({ segment: seq, position: 0, reason: 'header-checksum', lostBytes: 0, lostRecords: 0 });
      return { seq, fh, size, kind: 'torn', header: res.header };
    }
    if (res.fault === 'version') return whole('segment-version'); // a future writer's: an open drops it
    const walk = size > HEADER_SIZE ? walkRecords(fh, HEADER_SIZE, size) : undefined;
    // A zeroed header on the last segment is a creation a power cut undid:
    // an open keeps the records behind it and reports nothing.
    if (res.fault === 'zero' && last) return walk && walk.count > 0 ? { seq, fh, size, kind: 'torn', header: res.header } : { seq, fh, size, kind: 'skip' };
    if (walk && walk.count > 0) {
      // Salvaged by an open from its records; what lies behind them is lost.
      const lostBytes = Math.max(0, dataEnd(fh, walk.end, size) - walk.end);
      const lostRecords = lostBytes > 0 ? Math.max(1, Math.round(lostBytes / ((walk.end - HEADER_SIZE) / walk.count))) : 0;
      report.damage.push({ segment: seq, position: 0, reason: `header-${res.fault}`, lostBytes, lostRecords });
      return { seq, fh, size, kind: 'torn', header: res.header };
    }
    return whole(`segment-${res.fault}`);
  } catch (err) {
    fh.close();
    throw new IOError(`cannot read segment ${path}: ${(err as Error)?.message ?? err}`, { cause: err });
  }
}

/** The same plausibility rules an open applies to a checksummed header. */
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

function allZero(fh: FileHandle, size: number): boolean {
  const buf = new Uint8Array(Math.min(size, BLOCK_SIZE));
  for (let pos = 0; pos < size; pos += buf.length) {
    const n = fh.pread(buf, pos);
    for (let i = 0; i < n; i++) if (buf[i] !== 0) return false;
    if (n === 0) break;
  }
  return true;
}

/**
 * Walks the published records of a segment with a trusted header. Unlike the
 * open's repair walk it does not stop at a bad checksum: the frame still gives
 * the next record's position, exactly as a drain steps past it.
 */
async function walkSegment(
  p: Extract<Planned, { kind: 'ok' }>,
  report: VerifyReport,
  progress: (n: number) => Promise<void>,
): Promise<void> {
  const h = p.header;
  const limit = h.writeCursor;
  const add = (reason: string, position: number, lostBytes: number, lostRecords: number) =>
    report.damage.push({ segment: p.seq, position, reason, lostBytes, lostRecords });
  let block = new Uint8Array(Math.min(BLOCK_SIZE, Math.max(0, limit - HEADER_SIZE)));
  let pos = HEADER_SIZE;
  /** Frames found, intact or not: the header's written count should match. */
  let frames = 0;
  let framesAtCommit: number | undefined = h.commitCursor === HEADER_SIZE ? 0 : undefined;
  let reported = pos;
  const lostFrom = (at: number) => ({ bytes: limit - at, records: Math.max(0, h.writtenCount - frames) });

  while (pos < limit) {
    const want = Math.min(block.length, limit - pos);
    const n = p.fh.pread(block.subarray(0, want), pos);
    let buf = block;
    let f = frameRecord(buf, 0, n, limit - pos);
    if (f === 'need' && n === want) {
      // A record longer than the block: read it whole into a buffer of its own size.
      const v = readUvarint(block, 0, n)!;
      buf = new Uint8Array(v.size + v.value + CHECKSUM_SIZE);
      f = frameRecord(buf, 0, p.fh.pread(buf, pos), limit - pos);
    }
    if (f === 'need') {
      const lost = lostFrom(pos);
      add('truncated', pos, lost.bytes, lost.records);
      break;
    }
    // Frame every whole record in the buffer before reading again.
    let at = 0;
    let stopped = false;
    for (;;) {
      if (f === 'length' || (!checksumMatches(buf, f) && f.payloadEnd === f.payloadStart)) {
        // No usable length (an empty frame failing its checksum reads as slack): the boundaries behind it are gone.
        const lost = lostFrom(pos + at);
        add('length', pos + at, lost.bytes, lost.records);
        stopped = true;
        break;
      }
      const start = pos + at;
      const end = pos + f.end;
      if (checksumMatches(buf, f)) {
        report.records++;
        report.bytes += end - start;
      } else if (end === limit || intactRecordAt(p.fh, end, limit)) {
        // One record, unless a damaged length landed on a later boundary: the
        // written count, less the intact records after it, says how many.
        const rest = end === limit ? { end, count: 0 } : walkRecords(p.fh, end, limit);
        const lost = rest.end === limit ? Math.max(1, h.writtenCount - frames - rest.count) : 1;
        add('checksum', start, end - start, lost);
        frames += lost - 1;
      } else {
        // A damaged length that still frames inside the segment lands
        // mid-record; a drain loses the rest of the segment there, and so
        // does this report.
        const lost = lostFrom(start);
        add('length', start, lost.bytes, lost.records);
        stopped = true;
        break;
      }
      frames++;
      if (start < h.commitCursor && end > h.commitCursor) add('commit-cursor', h.commitCursor, 0, 0);
      if (end === h.commitCursor) framesAtCommit = frames;
      at = f.end;
      if (pos + at >= limit) break;
      const next = frameRecord(buf, at, buf === block ? n : buf.length, limit - pos);
      if (next === 'need') break;
      f = next;
    }
    pos += at;
    await progress(Math.min(pos, p.size) - reported);
    reported = Math.min(pos, p.size);
    if (stopped) return;
  }
  if (pos >= limit && frames !== h.writtenCount) {
    add('count-mismatch', limit, 0, Math.max(0, h.writtenCount - frames));
  }
  if (framesAtCommit !== undefined && framesAtCommit !== h.committedCount) {
    add('commit-cursor', h.commitCursor, 0, 0);
  }
}
