/**
 * What `Spool.open` does before the first call: list the segments, drop the
 * ones that cannot be read (zero-length leftovers silently, damaged headers as
 * counted loss, unknown versions as foreign), load the cursor, retire the
 * segments it says were consumed, and cut a torn frame off the newest one.
 */
import { join } from 'node:path';
import type { FileSystem } from '../storage/fs.js';
import { spoolSegmentNames } from '../storage/segment-names.js';
import { asIOError } from '../errors.js';
import { CorruptError, type FerryError } from '../errors.js';
import { parseSegmentHeader, SEGMENT_HEADER_SIZE, type CursorPosition } from './format.js';
import { readFrameAt } from './read-frame.js';
import { SpoolSegment } from './segment.js';

export interface RecoveryCounts {
  lostBytes: number;
  lostSegments: number;
  foreignSegments: number;
  foreignBytes: number;
  discarded: number;
}

export interface Recovered {
  segments: SpoolSegment[];
  /** File position of the head in `segments[0]`. */
  headOffset: number;
  /** The next unused segment number. */
  nextSeq: number;
  counts: RecoveryCounts;
  /** Loss found here, each handed to one later `pop` as its error. */
  events: FerryError[];
}

function tryUnlink(fs: FileSystem, path: string): void {
  try {
    fs.unlink(path);
  } catch {
    // still there next open, and judged again then
  }
}

/**
 * Cuts an incomplete or torn end off `seg`; returns the bytes cut. A power
 * cut can only tear what was never synced, and syncs cover prefixes, so the
 * partial frame at the end and the trailing run of whole frames that fail
 * their checksum are unacknowledged writing; a damaged frame with intact ones
 * behind it is left for the reader to drop.
 */
export function repairTail(seg: SpoolSegment): number {
  let pos = SEGMENT_HEADER_SIZE;
  let damagedFrom = -1;
  for (let f = readFrameAt(seg, pos); f.kind === 'ok' || f.kind === 'checksum'; f = readFrameAt(seg, pos)) {
    if (f.kind === 'ok') damagedFrom = -1;
    else if (damagedFrom < 0) damagedFrom = pos;
    pos = f.next;
  }
  const end = damagedFrom < 0 ? pos : damagedFrom;
  if (end === seg.size) return 0;
  seg.truncate(end);
  const cut = seg.size - end;
  seg.size = end;
  seg.durable = Math.min(seg.durable, end);
  return cut;
}

/**
 * Scans `dir`. Throws `IOError` only when a segment that is present cannot be
 * opened or read; damage is dropped and counted, never thrown.
 */
export function recover(fs: FileSystem, dir: string, cursor: CursorPosition | undefined): Recovered {
  const counts: RecoveryCounts = { lostBytes: 0, lostSegments: 0, foreignSegments: 0, foreignBytes: 0, discarded: 0 };
  const events: FerryError[] = [];
  const segments: SpoolSegment[] = [];
  let maxSeq = cursor?.seq ?? 0;
  try {
    for (const seq of spoolSegmentNames.list(fs.readdir(dir))) {
      maxSeq = Math.max(maxSeq, seq);
      const path = join(dir, spoolSegmentNames.fileName(seq));
      const h = fs.open(path, 'rw');
      const size = h.size();
      const head = new Uint8Array(Math.min(size, SEGMENT_HEADER_SIZE));
      h.pread(head, 0);
      const verdict = parseSegmentHeader(head);
      if (size === 0 || verdict.kind !== 'ok') {
        h.close();
        tryUnlink(fs, path);
        if (verdict.kind === 'foreign') {
          counts.foreignSegments++;
          counts.foreignBytes += size;
        } else if (size > 0) {
          // A zero-length file is an aborted create: it never held a record.
          counts.lostSegments++;
          counts.lostBytes += size;
          events.push(new CorruptError({ segment: seq, position: 0, reason: 'header', lostBytes: size }));
        }
        continue;
      }
      // What a previous process wrote is the baseline a rollback returns to;
      // open fdatasyncs it before saying anything is durable.
      // Only the newest keeps its descriptor (its tail is checked below): a
      // backlog of thousands of segments must not open them all at once.
      segments[segments.length - 1]?.close();
      segments.push(new SpoolSegment(fs, seq, path, size, size, h));
    }
    // Segments older than the cursor's were consumed; a crash before their
    // unlink leaves them behind.
    while (cursor && segments.length > 0 && segments[0]!.seq < cursor.seq) {
      const s = segments.shift()!;
      s.close();
      tryUnlink(fs, s.path);
    }
    const tail = segments[segments.length - 1];
    if (tail) counts.discarded += repairTail(tail);
    // Older segments are opened again when the head reaches them, so a file
    // deleted underneath shows up then instead of being read from a stale descriptor.
    for (const s of segments) if (s !== tail) s.close();
  } catch (err) {
    for (const s of segments) s.close();
    throw asIOError(`cannot recover the spool in ${dir}`, err);
  }
  const first = segments[0];
  let headOffset = SEGMENT_HEADER_SIZE;
  if (first && cursor && first.seq === cursor.seq) {
    headOffset = Math.min(Math.max(cursor.offset, SEGMENT_HEADER_SIZE), first.size);
  }
  return { segments, headOffset, nextSeq: maxSeq + 1, counts, events };
}
