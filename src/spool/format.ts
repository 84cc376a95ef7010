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
 * One frame for `payload`. The checksum covers the length bytes too, so the
 * length is staged right before the payload, hashed in one pass, then moved to
 * the front: no second copy of the payload.
 */
export function encodeFrame(payload: Uint8Array): Uint8Array {
  const n = payload.length;
  const out = new Uint8Array(FRAME_OVERHEAD + n);
  const view = new DataView(out.buffer);
  out.set(payload, FRAME_OVERHEAD);
  view.setUint32(8, n, false);
  const sum = xxh64(out.subarray(8));
  view.setUint32(0, n, false);
  view.setBigUint64(4, sum, false);
  return out;
}

/** The two fields in front of a payload. */
export interface FrameHeader {
  length: number;
  checksum: bigint;
}

/** Reads the 12 bytes in front of a payload. */
export function decodeFrameHeader(bytes: Uint8Array): FrameHeader {
  const view = new DataView(bytes.buffer, bytes.byteOffset, FRAME_OVERHEAD);
  return { length: view.getUint32(0, false), checksum: view.getBigUint64(4, false) };
}

/**
 * Checks a whole frame (header and payload, exactly `12 + length` bytes) and
 * returns its payload, or undefined when the checksum does not match. The
 * frame buffer is scratch: its bytes 8–11 are overwritten to hash in place.
 */
export function checkFrame(frame: Uint8Array): Uint8Array | undefined {
  const { length, checksum } = decodeFrameHeader(frame);
  if (frame.length !== FRAME_OVERHEAD + length) return undefined;
  frame.copyWithin(8, 0, 4);
  return xxh64(frame.subarray(8)) === checksum ? frame.subarray(FRAME_OVERHEAD) : undefined;
}

const FNV_OFFSET = 0xcbf29ce484222325n;
const FNV_PRIME = 0x100000001b3n;
const MASK64 = 0xffff_ffff_ffff_ffffn;

/** 64-bit FNV-1a of `bytes`. */
export function fnv64a(bytes: Uint8Array): bigint {
  let h = FNV_OFFSET;
  for (const b of bytes) h = ((h ^ BigInt(b)) * FNV_PRIME) & MASK64;
  return h;
}

/** A read position: segment number and file position (the 8 header bytes included). */
export interface CursorPosition {
  seq: number;
  offset: number;
}

/** The 24 cursor bytes for a position. */
export function encodeCursor(pos: CursorPosition): Uint8Array {
  const out = new Uint8Array(CURSOR_SIZE);
  const view = new DataView(out.buffer);
  view.setBigUint64(0, BigInt(pos.seq), false);
  view.setBigUint64(8, BigInt(pos.offset), false);
  view.setBigUint64(16, fnv64a(out.subarray(0, 16)), false);
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
