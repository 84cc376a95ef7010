/**
 * Reading one frame off a spool segment: is there room for its 12-byte
 * header, does its length stay inside the file, does its checksum match.
 * `pop`, `popBatch`, the tail repair (at open and after a rollback) and
 * `verifySpool` all read frames here, so they agree on what is damage; each
 * decides what the damage costs (a pop drops it and reports it, open cuts a
 * torn tail, verify lists it).
 *
 * The bytes come from a {@link FrameSource}: a `SpoolSegment` (through its
 * read-ahead window), or a whole file in memory for verify. A read that
 * fails (a short read, a vanished file) throws the source's error unchanged
 * for the caller to judge.
 */
import { checkFrame, frameLength, FRAME_OVERHEAD } from './format.js';

/** What a frame read needs of a segment. */
export interface FrameSource {
  /** Bytes in the segment, header included: frames end at or before it. */
  readonly size: number;
  /** Exactly `len` bytes at file position `pos` (a view the caller may not keep), or throws. */
  read(pos: number, len: number): Uint8Array;
}

/**
 * What lies at a position: an intact frame (`payload` is a view into the
 * source's bytes), a whole frame whose checksum fails, fewer than 12 bytes
 * before the end (`partial`), or a length that runs past the end (`length`).
 * `next` is the file position right after the frame.
 */
export type FrameRead =
  | { kind: 'ok'; payload: Uint8Array; next: number }
  | { kind: 'checksum'; next: number }
  | { kind: 'partial' }
  | { kind: 'length' };

const PARTIAL: FrameRead = { kind: 'partial' };
const LENGTH: FrameRead = { kind: 'length' };

/**
 * Where the frame at `at` ends, from its length field alone (its checksum is
 * not read), or why it is not whole inside the segment.
 */
export function frameEndAt(seg: FrameSource, at: number): number | 'partial' | 'length' {
  if (seg.size - at < FRAME_OVERHEAD) return 'partial';
  const next = at + FRAME_OVERHEAD + frameLength(seg.read(at, FRAME_OVERHEAD));
  return next > seg.size ? 'length' : next;
}

/** Reads and checks the frame at file position `at` of `seg`. */
export function readFrameAt(seg: FrameSource, at: number): FrameRead {
  const next = frameEndAt(seg, at);
  if (next === 'partial') return PARTIAL;
  if (next === 'length') return LENGTH;
  const payload = checkFrame(seg.read(at, next - at));
  return payload ? { kind: 'ok', payload, next } : { kind: 'checksum', next };
}

/**
 * Where the frames that lie whole inside `seg` end, walking their lengths
 * from `from`. Checksums are not read: a whole frame that fails its checksum
 * is the reader's to drop, one record at a time.
 */
export function wholeFramesEnd(seg: FrameSource, from: number): number {
  let pos = from;
  for (let next = frameEndAt(seg, pos); typeof next === 'number'; next = frameEndAt(seg, pos)) pos = next;
  return pos;
}

/** A file's bytes, read whole, as a frame source. */
export function bytesSource(bytes: Uint8Array): FrameSource {
  return { size: bytes.length, read: (pos, len) => bytes.subarray(pos, pos + len) };
}
