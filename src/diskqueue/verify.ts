/**
 * A read-only check of a diskqueue directory: every segment header and every
 * record checksum, without opening the queue. `DiskQueue.open` repairs what it
 * finds (drops bad segments, rewrites headers); this walk only reports, so it
 * can be run on a directory before deciding what to do with it.
 *
 * What it reports is what an open and a full drain would lose, and nothing
 * else (the Go diskqueue, "Crash recovery and corruption"; docs/FORMAT.md for
 * the bytes). Damage before a segment's commit cursor is no loss: those
 * records were consumed, and a drain starts at the cursor. What a header, a
 * gap in the numbering or a segment lost whole costs is the survey's
 * judgement (survey.ts), the one the open acts on; what this file adds is the
 * walk of a sound segment's records, as a drain meets them.
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
import { resolve } from 'node:path';
import { IOError } from '../errors.js';
import { nodeFileSystem, type FileHandle, type FileSystem } from '../storage/fs.js';
import { listSegments } from '../storage/segment-names.js';
import { HEADER_SIZE, CHECKSUM_SIZE, DEFAULT_SEGMENT_SIZE, checksumMatches, frameRecord, readUvarint } from './format.js';
import { walkRecords, intactRecordAt, type WalkResult } from './segment.js';
import { openSegment, judgeHeader, surveySegment, surveyLosses, segmentReadError, type SegmentSurvey, type SegmentLosses } from './survey.js';

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

/** A segment as the survey judged it, with its file held open for the walk. */
type Planned = SegmentSurvey & { fh: FileHandle };

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
    const firstSound = plans.find((p) => p.kind === 'sound');
    const geometry = firstSound?.kind === 'sound' ? firstSound.header.segmentSize : DEFAULT_SEGMENT_SIZE;
    const losses = surveyLosses(plans, geometry);
    plans.forEach((p, i) => reportSurvey(p, losses[i]!, report.damage));

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
      if (p.kind === 'sound') {
        if (p.header.segmentSize !== geometry) {
          report.damage.push({ segment: p.seq, position: 0, reason: 'segment-size-mismatch' });
        }
        report.committedRecords += p.header.committedCount;
        await walkSegment(p, report, progress);
        continue;
      }
      // The open rebuilds this header from the survey's walk, which stops at the first bad record.
      const walk = keptWalk(p);
      if (!walk) continue;
      report.records += walk.count;
      report.bytes += walk.end - HEADER_SIZE;
      await progress(walkSpan(p));
    }
    report.ok = report.damage.length === 0;
    return report;
  } finally {
    for (const p of plans) p.fh.close();
    lock.release();
  }
}

/** Reads one header and the records the survey needs, holding the file open for the walk. */
function plan(fs: FileSystem, dir: string, seq: number, last: boolean): Planned {
  const { path, fh } = openSegment(fs, dir, seq, 'r');
  try {
    const head = judgeHeader(fh, path);
    try {
      return { seq, size: head.size, fh, ...surveySegment(fh, head, last) };
    } catch (err) {
      throw segmentReadError(path, err);
    }
  } catch (err) {
    fh.close();
    throw err;
  }
}

/**
 * Books, in segment order, what the survey found before any record of a
 * sound segment is walked: a run of missing numbers, a header that cannot be
 * used, a foreign version, and a segment lost whole, each at the cost the
 * open books for it.
 */
function reportSurvey(p: Planned, losses: SegmentLosses, damage: VerifyDamage[]): void {
  const { missing, cost } = losses;
  if (missing) {
    damage.push({ segment: missing.first, lastSegment: missing.last, position: 0, reason: 'segment-missing', lostBytes: missing.bytes, lostRecords: missing.records });
  }
  switch (p.kind) {
    case 'salvaged':
      damage.push({ segment: p.seq, position: 0, reason: `header-${p.damage}`, lostBytes: p.lostBytes, lostRecords: p.lostRecords });
      break;
    case 'torn':
      // Reported as costing nothing: the segment replays from its first record.
      damage.push({ segment: p.seq, position: 0, reason: 'header-checksum', lostBytes: 0, lostRecords: 0 });
      break;
    case 'foreign':
      // A future writer's: an open drops it as foreign, a count of its own rather than a loss.
      damage.push({ segment: p.seq, position: 0, reason: 'segment-version', lostBytes: p.size });
      break;
    case 'lost':
      damage.push({ segment: p.seq, position: 0, reason: `segment-${p.damage}`, lostBytes: cost!.bytes, lostRecords: cost!.records });
      break;
  }
}

/** The records an open keeps from a segment whose header it rebuilds; undefined for a sound or dropped one. */
function keptWalk(p: Planned): WalkResult | undefined {
  return p.kind === 'torn' || p.kind === 'salvaged' || p.kind === 'unborn' ? p.walk : undefined;
}

/** Data bytes the walk of `p` will read. */
function walkSpan(p: Planned): number {
  if (p.kind === 'sound') return Math.max(0, Math.min(p.size, p.header.writeCursor) - HEADER_SIZE);
  return keptWalk(p) ? Math.max(0, p.size - HEADER_SIZE) : 0;
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
  p: Extract<Planned, { kind: 'sound' }>,
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
