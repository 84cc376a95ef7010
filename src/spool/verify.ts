/**
 * A read-only check of a spool directory: every segment header, every
 * frame's checksum, the cursor. Nothing is repaired or deleted (an open would
 * do both), so it is safe to run before deciding what to do with a damaged
 * spool. It takes the directory lock while it reads, so a running spool makes
 * it fail with `LockedError` instead of reading a moving target.
 */
import { join } from 'node:path';
import { nodeFileSystem, type FileSystem } from '../storage/fs.js';
import { spoolSegmentNames } from '../storage/segment-names.js';
import { asIOError } from '../errors.js';
import { CURSOR_FILE } from './cursor.js';
import { CURSOR_SIZE, decodeCursor, parseSegmentHeader, SEGMENT_HEADER_SIZE, type CursorPosition } from './format.js';
import { bytesSource, readFrameAt, wholeFramesEnd, type FrameSource } from './read-frame.js';

export interface SpoolDamage {
  segment: number;
  /** File position of the damage. */
  position: number;
  /**
   * `header`, `foreign` (an unknown version), `checksum`, `length` (overruns
   * the file), `torn` (a partial frame at the end of a segment, or, in the
   * newest segment, everything from the first of its trailing frames that
   * fail their checksum: what an open takes for an unsynced write a crash
   * tore, and cuts), `cursor` (the stored cursor points inside a frame: the
   * head starts reading there and drops what does not frame).
   */
  reason: string;
  /** Bytes an open or a pop would drop for it. */
  lostBytes: number;
}

export interface SpoolVerifyReport {
  ok: boolean;
  segments: number;
  /** Intact frames, delivered ones before the cursor included. */
  records: number;
  /** Their payload bytes. */
  bytes: number;
  /** How many of `records` lie before the cursor: delivered and committed, not yet removed. */
  consumed: number;
  /** The stored cursor, or null when it is missing, empty or torn (delivery would restart at the oldest segment). */
  cursor: CursorPosition | null;
  /** `empty`: the file a new spool creates, before its first commit; nothing is wrong. */
  cursorFile: 'ok' | 'empty' | 'missing' | 'torn';
  damage: SpoolDamage[];
}

function readAll(fs: FileSystem, path: string): Uint8Array {
  const h = fs.open(path, 'r');
  try {
    const buf = new Uint8Array(h.size());
    h.pread(buf, 0);
    return buf;
  } finally {
    h.close();
  }
}

/** Checks one segment's bytes; returns the damage a stored cursor inside one of its frames causes. */
function walk(seq: number, bytes: Uint8Array, report: SpoolVerifyReport): SpoolDamage | undefined {
  const cur = report.cursor;
  const consumed = (pos: number) => !!cur && (seq < cur.seq || (seq === cur.seq && pos < cur.offset));
  const header = parseSegmentHeader(bytes.subarray(0, SEGMENT_HEADER_SIZE));
  if (bytes.length === 0) return undefined; // an aborted create: removed at open, costs nothing
  if (header.kind !== 'ok') {
    report.damage.push({ segment: seq, position: 0, reason: header.kind === 'foreign' ? 'foreign' : 'header', lostBytes: bytes.length });
    return undefined;
  }
  const frames = bytesSource(bytes);
  let pos = SEGMENT_HEADER_SIZE;
  let cursorOnFrame = !cur || cur.seq !== seq || cur.offset <= SEGMENT_HEADER_SIZE || cur.offset >= bytes.length;
  while (pos < bytes.length) {
    if (pos === cur?.offset && cur.seq === seq) cursorOnFrame = true;
    const f = readFrameAt(frames, pos);
    if (f.kind === 'partial' || f.kind === 'length') {
      report.damage.push({ segment: seq, position: pos, reason: f.kind === 'partial' ? 'torn' : 'length', lostBytes: bytes.length - pos });
      break;
    }
    if (f.kind === 'checksum') {
      report.damage.push({ segment: seq, position: pos, reason: 'checksum', lostBytes: f.next - pos });
    } else {
      report.records++;
      report.bytes += f.payload.length;
      if (consumed(pos)) report.consumed++;
    }
    pos = f.next;
  }
  // A cursor in the part a broken length already cost is told by that damage.
  if (cursorOnFrame || cur!.offset >= pos) return undefined;
  return { segment: seq, position: cur!.offset, reason: 'cursor', lostBytes: lostFromInside(frames, cur!.offset) };
}

/**
 * Bytes the head drops when it starts reading at `at`, inside a frame: as a
 * pop does, a frame that runs past the file (or a partial one) costs the
 * rest of the segment, and one that fails its checksum costs itself when
 * the lengths after it walk to the end of the file, else the rest too. It
 * stops at the first frame that reads whole.
 */
function lostFromInside(frames: FrameSource, at: number): number {
  let pos = at;
  while (pos < frames.size) {
    const f = readFrameAt(frames, pos);
    if (f.kind === 'ok') break;
    if (f.kind !== 'checksum' || wholeFramesEnd(frames, f.next) !== frames.size) return frames.size - at;
    pos = f.next;
  }
  return pos - at;
}

/**
 * Names the newest segment's damage the way an open treats it: the trailing
 * run of bad frames (and a partial frame after them) is one torn write.
 */
function asOpenCutsTail(seq: number, size: number, damage: SpoolDamage[]): void {
  let end = size;
  let k = damage.length;
  while (k > 0) {
    const d = damage[k - 1]!;
    if (d.segment !== seq || d.reason === 'header' || d.reason === 'foreign' || d.position + d.lostBytes !== end) break;
    end = d.position;
    k--;
  }
  if (k === damage.length) return;
  damage.splice(k, damage.length - k, { segment: seq, position: end, reason: 'torn', lostBytes: size - end });
}

/**
 * Verifies the spool in `dir` without changing it.
 *
 * @throws LockedError a spool holds the directory.
 * @throws IOError the directory or a file could not be read.
 */
export function verifySpool(dir: string, fs: FileSystem = nodeFileSystem): SpoolVerifyReport {
  const lock = fs.lock(dir);
  try {
    const report: SpoolVerifyReport = { ok: true, segments: 0, records: 0, bytes: 0, consumed: 0, cursor: null, cursorFile: 'missing', damage: [] };
    const names = fs.readdir(dir);
    if (names.includes(CURSOR_FILE)) {
      const raw = readAll(fs, join(dir, CURSOR_FILE));
      report.cursor = decodeCursor(raw.subarray(0, CURSOR_SIZE)) ?? null;
      report.cursorFile = report.cursor ? 'ok' : raw.length === 0 ? 'empty' : 'torn';
    }
    const seqs = spoolSegmentNames.list(names);
    for (const seq of seqs) {
      report.segments++;
      const bytes = readAll(fs, join(dir, spoolSegmentNames.fileName(seq)));
      const atCursor = walk(seq, bytes, report);
      if (seq === seqs[seqs.length - 1]) asOpenCutsTail(seq, bytes.length, report.damage);
      if (atCursor) report.damage.push(atCursor);
    }
    report.ok = report.damage.length === 0;
    return report;
  } catch (err) {
    throw asIOError(`cannot verify the spool in ${dir}`, err);
  } finally {
    lock.release();
  }
}

/** Whether `names` (a directory listing) look like a spool: a segment or a cursor of the spool's naming. */
export function looksLikeSpool(names: string[]): boolean {
  return names.includes(CURSOR_FILE) || spoolSegmentNames.list(names).length > 0;
}
