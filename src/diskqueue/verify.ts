/**
 * A read-only check of a diskqueue directory: every segment header and every
 * record checksum, without opening the queue. `DiskQueue.open` repairs what it
 * finds (drops bad segments, rewrites headers); this walk only reports, so it
 * can be run on a directory before deciding what to do with it.
 *
 * What it reports is what an open and a full drain would lose, and nothing
 * else (the Go diskqueue, "Crash recovery and corruption"; docs/FORMAT.md for
 * the bytes). Damage before a segment's commit cursor is no loss: those
 * records were consumed, and a drain starts at the cursor. A segment lost
 * whole costs what the open estimates for it (loss-estimate.ts).
 *
 * | reason                  | found                                               | cost                  |
 * | ----------------------- | --------------------------------------------------- | --------------------- |
 * | `segment-short`         | file shorter than a header                          | the segment (estimated) |
 * | `segment-zero`          | zero-length or all-zero segment that is not the last | the segment (estimated) |
 * | `segment-magic`         | bad magic and no intact record behind it            | the segment (estimated) |
 * | `segment-insane`        | impossible cursors and no intact record behind them | the segment (estimated) |
 * | `segment-missing`       | a run of numbers missing between segments (not reclaimed); one entry per run, `segment` to `lastSegment` | each segment of the run (estimated) |
 * | `segment-version`       | a format version this code does not know            | the segment, dropped as foreign |
 * | `header-magic`, `header-zero`, `header-insane` | an unreadable header over intact records (the open salvages them) | the bytes behind the last intact record |
 * | `segment-size-mismatch` | another store geometry than the first segment's     | the open is refused   |
 * | `header-checksum`       | torn header, records intact (the open rebuilds it)  | none: replays from its first record |
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
  DEFAULT_SEGMENT_SIZE,
  FLAG_OVERSIZED,
  checksumMatches,
  decodeHeader,
  frameRecord,
  readUvarint,
  type SegmentHeader,
} from './format.js';
import { walkRecords, intactRecordAt, dataEnd, type WalkResult } from './segment.js';
import { estimateLostSegment, type SegmentShape } from './loss-estimate.js';

/** One damaged span found by {@link verifyQueue}. */
export interface VerifyDamage {
  /** Segment number (the `N` of `data.0000000N`); for `segment-missing`, the first number of the run. */
  segment: number;
  /** For `segment-missing` only: the last missing number of the run (`segment` when one is missing). */
  lastSegment?: number;
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

/**
 * A segment after its header was read: how to walk it. `damage` is what its
 * header alone shows; `lost` names a segment the open drops whole (its cost is
 * estimated once the neighbours are known); `walk` is a header-less walk
 * already made.
 */
type Planned = { seq: number; fh: FileHandle; size: number; damage?: VerifyDamage } & (
  | { kind: 'skip'; lost?: string }
  | { kind: 'ok'; header: SegmentHeader }
  | { kind: 'torn'; header?: SegmentHeader; walk?: WalkResult }
);

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
    seqs.forEach((seq, i) => plans.push(plan(fs, abs, seq, i === seqs.length - 1)));
    report.segments = plans.length;
    const firstOk = plans.find((p) => p.kind === 'ok');
    const geometry = firstOk?.kind === 'ok' ? firstOk.header.segmentSize : DEFAULT_SEGMENT_SIZE;
    bookSegments(plans, geometry, report);

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

    for (const p of plans) {
      if (p.kind === 'skip') continue;
      if (p.kind === 'torn') {
        // The open rebuilds this header from a walk that stops at the first bad record.
        const walk = p.walk ?? walkRecords(p.fh, HEADER_SIZE, p.size);
        report.records += walk.count;
        report.bytes += walk.end - HEADER_SIZE;
        await progress(walkSpan(p));
        continue;
      }
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

/**
 * Books, in segment order, what each header shows and every segment the open
 * would count as lost whole: a run of missing numbers (one entry however long
 * the run, so a stray high number costs nothing to report) and a segment
 * nothing in which vouches for itself. Their cost is estimated exactly as the
 * open estimates it, from the segments the open keeps.
 */
function bookSegments(plans: Planned[], geometry: number, report: VerifyReport): void {
  /** The segments an open keeps so far, each measured only when an estimate needs it. */
  const kept: Array<() => SegmentShape> = [];
  const nearestFirst = function* (): Generator<SegmentShape> {
    for (let i = kept.length - 1; i >= 0; i--) yield kept[i]!();
  };
  const estimate = (next: Planned | undefined) => estimateLostSegment(nearestFirst(), next?.kind === 'ok' ? headerShape(next.header) : undefined, geometry);
  let retiredSoFar = true;
  plans.forEach((p, i) => {
    const prev = plans[i - 1];
    // A number missing between two segments is a lost segment, unless
    // everything before it was committed (then reclaim removed it).
    if (prev && !retiredSoFar && p.seq > prev.seq + 1) {
      const count = p.seq - prev.seq - 1;
      const e = estimate(p);
      report.damage.push({
        segment: prev.seq + 1,
        lastSegment: p.seq - 1,
        position: 0,
        reason: 'segment-missing',
        lostBytes: e.bytes * count,
        lostRecords: e.records * count,
      });
    }
    retiredSoFar &&= p.kind === 'ok' && p.header.commitCursor >= p.header.writeCursor && p.header.committedCount >= p.header.writtenCount;
    if (p.damage) report.damage.push(p.damage);
    if (p.kind === 'skip') {
      if (p.lost) {
        const e = estimate(plans[i + 1]);
        report.damage.push({ segment: p.seq, position: 0, reason: p.lost, lostBytes: e.bytes, lostRecords: e.records });
      }
      return;
    }
    let shape: SegmentShape | undefined;
    kept.push(() => (shape ??= keptShape(p, geometry)));
  });
}

function headerShape(h: SegmentHeader): SegmentShape {
  return { oversized: (h.flags & FLAG_OVERSIZED) !== 0, writtenCount: h.writtenCount, writeCursor: h.writeCursor };
}

/** A kept segment as the open leaves it: a cut file ends at its last record, a rebuilt header at its walk. */
function keptShape(p: Exclude<Planned, { kind: 'skip' }>, geometry: number): SegmentShape {
  if (p.kind === 'ok') {
    const h = p.header;
    if (p.size >= h.writeCursor) return headerShape(h);
    const walk = walkRecords(p.fh, HEADER_SIZE, Math.min(p.size, HEADER_SIZE + h.capacity), { resync: true });
    return { oversized: (h.flags & FLAG_OVERSIZED) !== 0, writtenCount: walk.count + walk.damaged, writeCursor: walk.end };
  }
  p.walk ??= walkRecords(p.fh, HEADER_SIZE, p.size);
  return { oversized: p.size - HEADER_SIZE > geometry, writtenCount: p.walk.count, writeCursor: p.walk.end };
}

/** Data bytes the walk of `p` will read. */
function walkSpan(p: Planned): number {
  if (p.kind === 'skip') return 0;
  if (p.kind === 'torn') return Math.max(0, p.size - HEADER_SIZE);
  return Math.max(0, Math.min(p.size, p.header.writeCursor) - HEADER_SIZE);
}

/** Reads one header and decides how the segment is walked. */
function plan(fs: FileSystem, dir: string, seq: number, last: boolean): Planned {
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
    const whole = (reason: string): Planned => ({ seq, fh, size, kind: 'skip', lost: reason });
    /** Salvaged by an open from its records; what lies behind them is lost. */
    const salvaged = (reason: string, walk: WalkResult, header?: SegmentHeader): Planned => {
      const lostBytes = Math.max(0, dataEnd(fh, walk.end, size) - walk.end);
      const lostRecords = lostBytes > 0 ? Math.max(1, Math.round(lostBytes / ((walk.end - HEADER_SIZE) / walk.count))) : 0;
      return { seq, fh, size, kind: 'torn', header, walk, damage: { segment: seq, position: 0, reason, lostBytes, lostRecords } };
    };
    if (size === 0) return last ? { seq, fh, size, kind: 'skip' } : whole('segment-zero');
    const res = decodeHeader(buf.subarray(0, n));
    if (res.ok && sane(res.header)) return { seq, fh, size, kind: 'ok', header: res.header };
    if (res.ok) {
      const walk = size > HEADER_SIZE ? walkRecords(fh, HEADER_SIZE, size) : undefined;
      if (!walk || walk.count === 0) return whole('segment-insane');
      return salvaged('header-insane', walk, res.header);
    }
    if ((res.fault === 'zero' || res.fault === 'short') && last && allZero(fh, size)) return { seq, fh, size, kind: 'skip' };
    if (res.fault === 'checksum' && res.header) {
      return { seq, fh, size, kind: 'torn', header: res.header, damage: { segment: seq, position: 0, reason: 'header-checksum', lostBytes: 0, lostRecords: 0 } };
    }
    if (res.fault === 'version') {
      // A future writer's: an open drops it as foreign, a count of its own rather than a loss.
      return { seq, fh, size, kind: 'skip', damage: { segment: seq, position: 0, reason: 'segment-version', lostBytes: size } };
    }
    const walk = size > HEADER_SIZE ? walkRecords(fh, HEADER_SIZE, size) : undefined;
    // A zeroed header on the last segment is a creation a power cut undid:
    // an open keeps the records behind it and reports nothing.
    if (res.fault === 'zero' && last) return walk && walk.count > 0 ? { seq, fh, size, kind: 'torn', header: res.header, walk } : { seq, fh, size, kind: 'skip' };
    if (walk && walk.count > 0) return salvaged(`header-${res.fault}`, walk, res.header);
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

/** One step of {@link frameSteps}. */
type Step =
  | { kind: 'record'; start: number; end: number; intact: boolean; empty: boolean }
  /** No usable length prefix at `at`: nothing behind it can be framed. */
  | { kind: 'length'; at: number }
  /** The file ends inside the record at `at`. */
  | { kind: 'need'; at: number }
  /** Every record before `pos` was framed (a block's worth of reading). */
  | { kind: 'read'; pos: number };

/**
 * Frames records from `from` up to `limit` by their length prefixes alone,
 * a block at a time, never holding more than a block or the one record
 * larger than it. Ends at `limit` or at the first step that cannot be framed.
 */
function* frameSteps(fh: FileHandle, from: number, limit: number): Generator<Step> {
  const block = new Uint8Array(Math.min(BLOCK_SIZE, Math.max(0, limit - from)));
  let pos = from;
  while (pos < limit) {
    const want = Math.min(block.length, limit - pos);
    const n = fh.pread(block.subarray(0, want), pos);
    let buf = block;
    let avail = n;
    let f = frameRecord(buf, 0, n, limit - pos);
    if (f === 'need' && n === want) {
      // A record longer than the block: read it whole into a buffer of its own size.
      const v = readUvarint(block, 0, n)!;
      buf = new Uint8Array(v.size + v.value + CHECKSUM_SIZE);
      avail = fh.pread(buf, pos);
      f = frameRecord(buf, 0, avail, limit - pos);
    }
    if (f === 'need') {
      yield { kind: 'need', at: pos };
      return;
    }
    let at = 0;
    for (;;) {
      if (f === 'length') {
        yield { kind: 'length', at: pos + at };
        return;
      }
      yield { kind: 'record', start: pos + at, end: pos + f.end, intact: checksumMatches(buf, f), empty: f.payloadEnd === f.payloadStart };
      at = f.end;
      if (pos + at >= limit) break;
      const next = frameRecord(buf, at, avail, limit - pos);
      if (next === 'need') break;
      f = next;
    }
    pos += at;
    yield { kind: 'read', pos };
  }
}

/**
 * Walks the published records of a segment with a trusted header, in two
 * parts, as a drain meets them.
 *
 * The committed prefix (header end to commit cursor) was consumed: damage in
 * it costs nothing, and a drain never frames it, since the reader starts at
 * the commit cursor. It is walked only to count its intact records and to
 * check that the commit cursor sits on a boundary with the right count;
 * where its framing breaks, the walk goes on from the commit cursor, a
 * boundary by construction.
 *
 * The rest is walked like a drain: a bad checksum is stepped over when the
 * frame still leads to an intact record, a bad length ends the segment.
 */
async function walkSegment(
  p: Extract<Planned, { kind: 'ok' }>,
  report: VerifyReport,
  progress: (n: number) => Promise<void>,
): Promise<void> {
  const h = p.header;
  const limit = h.writeCursor;
  const cc = h.commitCursor;
  const add = (reason: string, position: number, lostBytes: number, lostRecords: number) =>
    report.damage.push({ segment: p.seq, position, reason, lostBytes, lostRecords });
  const reportTo = Math.min(p.size, limit);
  let reported = HEADER_SIZE;
  const advance = async (pos: number) => {
    const to = Math.min(pos, reportTo);
    if (to > reported) {
      await progress(to - reported);
      reported = to;
    }
  };
  const intact = (start: number, end: number) => {
    report.records++;
    report.bytes += end - start;
  };

  /** Frames found, intact or not: the header's written count should match. */
  let frames = 0;
  let from = cc;
  if (cc === HEADER_SIZE) {
    if (h.committedCount !== 0) add('commit-cursor', cc, 0, 0);
  } else {
    /** Every frame so far was intact, so `frames` counts records and not guesses. */
    let counted = true;
    let outcome: 'boundary' | 'straddle' | 'broken' | 'cut' = 'broken';
    let cutAt = cc;
    for (const s of frameSteps(p.fh, HEADER_SIZE, limit)) {
      if (s.kind === 'read') {
        await advance(s.pos);
        continue;
      }
      if (s.kind !== 'record') {
        if (s.kind === 'need' && p.size < cc) {
          outcome = 'cut';
          cutAt = s.at;
        }
        break;
      }
      if (s.start < cc && s.end > cc) {
        // An intact record across the commit cursor proves the cursor wrong;
        // a damaged one only says that the prefix's framing is lost.
        if (s.intact) {
          outcome = 'straddle';
          from = s.start;
        }
        break;
      }
      if (s.intact) intact(s.start, s.end);
      else if (s.empty || (s.end < cc && !intactRecordAt(p.fh, s.end, limit))) break;
      else counted = false; // a damaged length may have landed on a later boundary
      frames++;
      if (s.end === cc) {
        outcome = 'boundary';
        break;
      }
    }
    if (outcome === 'cut') {
      // The file ends inside the consumed prefix: everything published after
      // the commit cursor is gone, nothing before it was owed.
      add('truncated', cutAt, limit - cc, Math.max(0, h.writtenCount - h.committedCount));
      await advance(reportTo);
      return;
    }
    if (outcome === 'boundary' && counted && frames !== h.committedCount) add('commit-cursor', cc, 0, 0);
    if (outcome === 'boundary' || outcome === 'broken') frames = counted && outcome === 'boundary' ? frames : h.committedCount;
  }
  await advance(from);

  const lostFrom = (at: number) => ({ bytes: limit - Math.max(at, cc), records: Math.max(0, h.writtenCount - Math.max(frames, h.committedCount)) });
  let pos = from;
  for (const s of frameSteps(p.fh, from, limit)) {
    if (s.kind === 'read') {
      pos = s.pos;
      await advance(pos);
      continue;
    }
    if (s.kind === 'need') {
      const lost = lostFrom(s.at);
      add('truncated', s.at, lost.bytes, lost.records);
      await advance(reportTo);
      return;
    }
    if (s.kind === 'length' || (!s.intact && s.empty)) {
      // No usable length (an empty frame failing its checksum reads as slack): the boundaries behind it are gone.
      const at = s.kind === 'length' ? s.at : s.start;
      const lost = lostFrom(at);
      add('length', at, lost.bytes, lost.records);
      await advance(reportTo);
      return;
    }
    const { start, end } = s;
    if (s.intact) {
      intact(start, end);
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
      await advance(reportTo);
      return;
    }
    frames++;
    if (start < cc && end > cc) add('commit-cursor', cc, 0, 0);
    pos = end;
  }
  await advance(reportTo);
  if (pos >= limit && frames !== h.writtenCount) {
    add('count-mismatch', limit, 0, Math.max(0, h.writtenCount - frames));
  }
}
