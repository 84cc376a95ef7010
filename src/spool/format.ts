/**
 * The spool's bytes (the Go spool's format, version 1; docs/FORMAT.md):
 *
 *   segment: "KSPOOL" | version u16be | frame*
 *   frame:   len u32be | xxhash64(len ‖ payload) u64be | payload
 *   cursor:  seq u64be | offset u64be | fnv64a(first 16 bytes) u64be
 *
 * Pure functions only: no file access here, so the golden tests can pin the
 * bytes in both directions without a file system.
 */
import { xxh64 } from '../storage/xxhash.js';

/** The 6 magic bytes at the start of every segment. */
export const MAGIC = new TextEncoder().encode('KSPOOL');
/** The format version this build writes. */
export const FORMAT_VERSION = 1;
/** Versions this build can read. */
export const KNOWN_VERSIONS: ReadonlySet<number> = new Set([FORMAT_VERSION]);
/** Magic plus version. */
export const SEGMENT_HEADER_SIZE = 8;
/** Length plus checksum in front of every payload. */
export const FRAME_OVERHEAD = 12;
/** The largest payload a u32 length can describe: 4 GiB − 1. */
export const MAX_RECORD_BYTES = 0xffff_ffff;
/** The cursor file's size. */
export const CURSOR_SIZE = 24;

/** A frame's size on disk for a payload of `len` bytes. */
export const frameSize = (len: number): number => FRAME_OVERHEAD + len;

/** The segment header for `version`. */
export function encodeSegmentHeader(version = FORMAT_VERSION): Uint8Array {
  const out = new Uint8Array(SEGMENT_HEADER_SIZE);
  out.set(MAGIC, 0);
  new DataView(out.buffer).setUint16(6, version, false);
  return out;
}

/** What a segment's first bytes say about it. */
export type HeaderVerdict =
  | { kind: 'ok'; version: number }
  | { kind: 'foreign'; version: number }
  | { kind: 'damaged' };

/** Reads a segment header: damaged (short or bad magic), foreign (a version this build cannot read), or ok. */
export function parseSegmentHeader(bytes: Uint8Array): HeaderVerdict {
  if (bytes.length < SEGMENT_HEADER_SIZE) return { kind: 'damaged' };
  for (let i = 0; i < MAGIC.length; i++) if (bytes[i] !== MAGIC[i]) return { kind: 'damaged' };
  const version = (bytes[6]! << 8) | bytes[7]!;
  return KNOWN_VERSIONS.has(version) ? { kind: 'ok', version } : { kind: 'foreign', version };
}

/**
 * The last array a frame was written into and a view of its buffer: frames
 * are written into a few staging buffers many times over. Keyed by the array
 * itself: reading `out.buffer` for every frame cost about a tenth of writing
 * a 100-byte frame.
 */
let frameOut: Uint8Array | undefined;
let frameView: DataView | undefined;

/**
 * Writes the frame for `payload` into `out` at `at` (at least `12 +
 * payload.length` bytes from there) and returns its length. The checksum
 * covers the length bytes too, so the length is staged right before the
 * payload, hashed in one pass, then moved to the front: no second copy of
 * the payload.
 */
export function writeFrame(payload: Uint8Array, out: Uint8Array, at = 0): number {
  const n = payload.length;
  if (frameOut !== out) {
    frameView = new DataView(out.buffer);
    frameOut = out;
  }
  const view = frameView!;
  const base = out.byteOffset + at;
  out.set(payload, at + FRAME_OVERHEAD);
  view.setUint32(base + 8, n, false);
  const sum = xxh64(out.subarray(at + 8, at + FRAME_OVERHEAD + n));
  view.setUint32(base, n, false);
  view.setBigUint64(base + 4, sum, false);
  return FRAME_OVERHEAD + n;
}

/**
 * Writes the frames of records `from` to `to − 1` of a run (record `k` is
 * `bytes[starts[k], starts[k] + lengths[k])`) into `out` at `at`, back to
 * back: the bytes {@link writeFrame} writes for each in turn. Returns their
 * length. When the records lie in order with at most 12 bytes between
 * neighbours (lines and their newlines), their whole span is copied with one
 * `set` to the end of the frames' room and each record moved down into place
 * (a `copyWithin`, no view per record; a record's copy never starts before
 * its frame, since each gap is at most a frame header); otherwise each is
 * copied through a view.
 */
export function writeFrames(bytes: Uint8Array, starts: readonly number[], lengths: readonly number[], from: number, to: number, out: Uint8Array, at: number): number {
  let total = 0;
  let spanned = true;
  for (let k = from; k < to; k++) {
    total += FRAME_OVERHEAD + lengths[k]!;
    if (k > from) {
      const gap = starts[k]! - (starts[k - 1]! + lengths[k - 1]!);
      if (gap < 0 || gap > FRAME_OVERHEAD) spanned = false;
    }
  }
  if (to <= from) return 0;
  if (!spanned) {
    let cursor = at;
    for (let k = from; k < to; k++) cursor += writeFrame(bytes.subarray(starts[k]!, starts[k]! + lengths[k]!), out, cursor);
    return total;
  }
  if (frameOut !== out) {
    frameView = new DataView(out.buffer);
    frameOut = out;
  }
  const view = frameView!;
  const first = starts[from]!;
  const spanEnd = starts[to - 1]! + lengths[to - 1]!;
  const copyAt = at + total - (spanEnd - first);
  out.set(bytes.subarray(first, spanEnd), copyAt);
  let cursor = at;
  for (let k = from; k < to; k++) {
    const n = lengths[k]!;
    const src = copyAt + (starts[k]! - first);
    const dest = cursor + FRAME_OVERHEAD;
    if (src !== dest) out.copyWithin(dest, src, src + n);
    // As writeFrame: the length staged right before the payload, hashed with it, then moved to the front.
    const base = out.byteOffset + cursor;
    view.setUint32(base + 8, n, false);
    const sum = xxh64(out.subarray(cursor + 8, dest + n));
    view.setUint32(base, n, false);
    view.setBigUint64(base + 4, sum, false);
    cursor = dest + n;
  }
  return total;
}

/** The frame for `payload`, in a buffer of its own. */
export function encodeFrame(payload: Uint8Array): Uint8Array {
  const out = new Uint8Array(FRAME_OVERHEAD + payload.length);
  writeFrame(payload, out);
  return out;
}

/** The two fields in front of a payload. */
export interface FrameHeader {
  length: number;
  checksum: bigint;
}

/** The payload length a frame's header gives (u32 big-endian), without the checksum's bigint. */
export function frameLength(bytes: Uint8Array): number {
  return ((bytes[0]! << 24) | (bytes[1]! << 16) | (bytes[2]! << 8) | bytes[3]!) >>> 0;
}

/** Reads the 12 bytes in front of a payload. */
export function decodeFrameHeader(bytes: Uint8Array): FrameHeader {
  const view = new DataView(bytes.buffer, bytes.byteOffset, FRAME_OVERHEAD);
  return { length: view.getUint32(0, false), checksum: view.getBigUint64(4, false) };
}

/**
 * Checks a whole frame (header and payload, exactly `12 + length` bytes) and
 * returns its payload (a view into `frame`), or undefined when the checksum
 * does not match. Bytes 8–11 are borrowed to hash length and payload in one
 * pass and put back before it returns.
 */
export function checkFrame(frame: Uint8Array): Uint8Array | undefined {
  const view = new DataView(frame.buffer, frame.byteOffset, FRAME_OVERHEAD);
  const length = view.getUint32(0, false);
  if (frame.length !== FRAME_OVERHEAD + length) return undefined;
  const checksum = view.getBigUint64(4, false);
  const b8 = frame[8]!;
  const b9 = frame[9]!;
  const b10 = frame[10]!;
  const b11 = frame[11]!;
  frame.copyWithin(8, 0, 4);
  const ok = xxh64(frame.subarray(8)) === checksum;
  frame[8] = b8;
  frame[9] = b9;
  frame[10] = b10;
  frame[11] = b11;
  return ok ? frame.subarray(FRAME_OVERHEAD) : undefined;
}

/** 64-bit FNV-1a of `bytes` as its high and low 32-bit halves. */
function fnv64aHalves(bytes: Uint8Array): [number, number] {
  // The prime is 2^40 + 0x1b3, so a multiply is h·0x1b3 + (h << 40); two
  // 32-bit halves keep it in exact double arithmetic, far cheaper than BigInt.
  let hi = 0xcbf29ce4;
  let lo = 0x84222325;
  for (let i = 0; i < bytes.length; i++) {
    lo = (lo ^ bytes[i]!) >>> 0;
    const l = lo * 0x1b3;
    hi = (hi * 0x1b3 + Math.floor(l / 0x1_0000_0000) + ((lo << 8) >>> 0)) >>> 0;
    lo = l >>> 0;
  }
  return [hi, lo];
}

/** 64-bit FNV-1a of `bytes`. */
export function fnv64a(bytes: Uint8Array): bigint {
  const [hi, lo] = fnv64aHalves(bytes);
  return (BigInt(hi) << 32n) | BigInt(lo);
}

/** A read position: segment number and file position (the 8 header bytes included). */
export interface CursorPosition {
  seq: number;
  offset: number;
}

/** Writes the 24 cursor bytes for a position into `out`. */
export function writeCursor(pos: CursorPosition, out: Uint8Array): void {
  const view = new DataView(out.buffer, out.byteOffset, CURSOR_SIZE);
  view.setUint32(0, Math.floor(pos.seq / 0x1_0000_0000), false);
  view.setUint32(4, pos.seq >>> 0, false);
  view.setUint32(8, Math.floor(pos.offset / 0x1_0000_0000), false);
  view.setUint32(12, pos.offset >>> 0, false);
  const [hi, lo] = fnv64aHalves(out.subarray(0, 16));
  view.setUint32(16, hi, false);
  view.setUint32(20, lo, false);
}

/** The 24 cursor bytes for a position. */
export function encodeCursor(pos: CursorPosition): Uint8Array {
  const out = new Uint8Array(CURSOR_SIZE);
  writeCursor(pos, out);
  return out;
}

/** The position in cursor bytes, or undefined when they are short, torn, or out of range. */
export function decodeCursor(bytes: Uint8Array): CursorPosition | undefined {
  if (bytes.length < CURSOR_SIZE) return undefined;
  const view = new DataView(bytes.buffer, bytes.byteOffset, CURSOR_SIZE);
  if (view.getBigUint64(16, false) !== fnv64a(bytes.subarray(0, 16))) return undefined;
  const seq = view.getBigUint64(0, false);
  const offset = view.getBigUint64(8, false);
  if (seq > BigInt(Number.MAX_SAFE_INTEGER) || offset > BigInt(Number.MAX_SAFE_INTEGER)) return undefined;
  return { seq: Number(seq), offset: Number(offset) };
}
