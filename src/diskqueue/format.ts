/**
 * diskqueue on-disk format v1, byte for byte the Go diskqueue's (docs/FORMAT.md
 * has the tables). Pure functions only: no file handles, so the framing can be
 * tested and fuzzed on its own.
 *
 * A segment file is a 64-byte little-endian header followed by records; each
 * record is `uvarint(len) ‖ payload ‖ xxhash64(payload)` (u64 LE, seed 0).
 */
import { xxh64 } from '../storage/xxhash.js';

/** Header size in bytes; the data region starts here. */
export const HEADER_SIZE = 64;
/** The ASCII bytes `WALGOseg`. */
export const MAGIC = new Uint8Array([0x57, 0x41, 0x4c, 0x47, 0x4f, 0x73, 0x65, 0x67]);
export const FORMAT_VERSION = 1;
/** Header flag bit 0: the segment was sized for one record larger than the store's segment size. */
export const FLAG_OVERSIZED = 1;
/** Bytes of checksum after each payload. */
export const CHECKSUM_SIZE = 8;
/** Segment sizes are multiples of this (a constant, not the host's page size). */
export const SEGMENT_ALIGN = 4096;
export const MIN_SEGMENT_SIZE = 4096;
export const MAX_SEGMENT_SIZE = 2 ** 48 - 4096;
export const DEFAULT_SEGMENT_SIZE = 8 * 1024 * 1024;
/** Longest valid uvarint, in bytes. */
export const MAX_UVARINT_BYTES = 10;
/** Bytes of the enqueue-time stamp that `stampRecords` puts before a payload (u64 BE, Unix ns). */
export const STAMP_SIZE = 8;

// Header field offsets (docs/FORMAT.md, "Segment header").
const OFF_COMMIT_CURSOR = 8;
const OFF_WRITE_CURSOR = 16;
const OFF_WRITTEN = 24;
const OFF_COMMITTED = 32;
const OFF_VERSION = 40;
const OFF_FLAGS = 41;
const OFF_CAPACITY = 42;
const OFF_SEGMENT_SIZE = 50;
const OFF_CHECKSUM = 56;

/** The fields of a segment header. Cursors are file positions (header included). */
export interface SegmentHeader {
  commitCursor: number;
  writeCursor: number;
  writtenCount: number;
  committedCount: number;
  version: number;
  flags: number;
  /** Bytes in the data region. */
  capacity: number;
  /** The segment size the store was created with. */
  segmentSize: number;
}

/** Why a header could not be trusted. */
export type HeaderFault = 'short' | 'zero' | 'magic' | 'version' | 'checksum';

export type HeaderResult =
  | { ok: true; header: SegmentHeader }
  | { ok: false; fault: HeaderFault; header?: SegmentHeader };

/** Rounds a requested segment size to the format's rules (floor 4 KiB, multiple of 4096, cap 2^48−4096). */
export function normalizeSegmentSize(requested: number): number {
  const floored = Math.max(MIN_SEGMENT_SIZE, Math.floor(requested));
  const rounded = Math.ceil(floored / SEGMENT_ALIGN) * SEGMENT_ALIGN;
  return Math.min(rounded, MAX_SEGMENT_SIZE);
}

function getU64(view: DataView, at: number): number {
  return view.getUint32(at, true) + view.getUint32(at + 4, true) * 2 ** 32;
}

/** Writes a non-negative safe integer as u64 little-endian without a bigint. */
function setU64(view: DataView, at: number, n: number): void {
  view.setUint32(at, n % 2 ** 32, true);
  view.setUint32(at + 4, Math.floor(n / 2 ** 32), true);
}

/** Encodes `h` into a new 64-byte header, checksum included. */
export function encodeHeader(h: SegmentHeader, out = new Uint8Array(HEADER_SIZE)): Uint8Array {
  const view = new DataView(out.buffer, out.byteOffset, HEADER_SIZE);
  out.set(MAGIC, 0);
  setU64(view, OFF_COMMIT_CURSOR, h.commitCursor);
  setU64(view, OFF_WRITE_CURSOR, h.writeCursor);
  setU64(view, OFF_WRITTEN, h.writtenCount);
  setU64(view, OFF_COMMITTED, h.committedCount);
  out[OFF_VERSION] = h.version;
  out[OFF_FLAGS] = h.flags;
  setU64(view, OFF_CAPACITY, h.capacity);
  // u48 little-endian: low 32 bits, then high 16 bits.
  view.setUint32(OFF_SEGMENT_SIZE, h.segmentSize % 2 ** 32, true);
  view.setUint16(OFF_SEGMENT_SIZE + 4, Math.floor(h.segmentSize / 2 ** 32), true);
  view.setBigUint64(OFF_CHECKSUM, xxh64(out.subarray(0, OFF_CHECKSUM)), true);
  return out;
}

/**
 * A reusable header image for the hot path (a commit writes one per take):
 * the fixed fields are set once, and {@link HeaderImage.encode} fills in the
 * four cursors and the checksum without allocating. The bytes are valid until
 * the next `encode`; the writes that use them copy them synchronously.
 */
export class HeaderImage {
  readonly bytes = new Uint8Array(HEADER_SIZE);
  private readonly view = new DataView(this.bytes.buffer);
  private readonly covered = this.bytes.subarray(0, OFF_CHECKSUM);

  constructor(fixed: Pick<SegmentHeader, 'version' | 'flags' | 'capacity' | 'segmentSize'>) {
    encodeHeader({ ...fixed, commitCursor: 0, writeCursor: 0, writtenCount: 0, committedCount: 0 }, this.bytes);
  }

  encode(commitCursor: number, writeCursor: number, writtenCount: number, committedCount: number): Uint8Array {
    const view = this.view;
    setU64(view, OFF_COMMIT_CURSOR, commitCursor);
    setU64(view, OFF_WRITE_CURSOR, writeCursor);
    setU64(view, OFF_WRITTEN, writtenCount);
    setU64(view, OFF_COMMITTED, committedCount);
    view.setBigUint64(OFF_CHECKSUM, xxh64(this.covered), true);
    return this.bytes;
  }
}

function readFields(buf: Uint8Array): SegmentHeader {
  const view = new DataView(buf.buffer, buf.byteOffset, HEADER_SIZE);
  return {
    commitCursor: getU64(view, OFF_COMMIT_CURSOR),
    writeCursor: getU64(view, OFF_WRITE_CURSOR),
    writtenCount: getU64(view, OFF_WRITTEN),
    committedCount: getU64(view, OFF_COMMITTED),
    version: buf[OFF_VERSION]!,
    flags: buf[OFF_FLAGS]!,
    capacity: getU64(view, OFF_CAPACITY),
    segmentSize: view.getUint32(OFF_SEGMENT_SIZE, true) + view.getUint16(OFF_SEGMENT_SIZE + 4, true) * 2 ** 32,
  };
}

/**
 * Decodes a header. A checksum failure with the magic intact still returns
 * the (untrusted) fields, since that is a torn rewrite to be repaired from the
 * records. Only a header whose checksum holds can be from an unknown version.
 */
export function decodeHeader(buf: Uint8Array): HeaderResult {
  if (buf.length < HEADER_SIZE) return { ok: false, fault: 'short' };
  if (buf.subarray(0, HEADER_SIZE).every((b) => b === 0)) return { ok: false, fault: 'zero' };
  for (let i = 0; i < MAGIC.length; i++) if (buf[i] !== MAGIC[i]) return { ok: false, fault: 'magic' };
  const header = readFields(buf);
  // The checksum is checked before the version: a damaged version byte must
  // read as damage, not as a segment from a future format (which is dropped).
  const view = new DataView(buf.buffer, buf.byteOffset, HEADER_SIZE);
  if (view.getBigUint64(OFF_CHECKSUM, true) !== xxh64(buf.subarray(0, OFF_CHECKSUM))) {
    return { ok: false, fault: 'checksum', header };
  }
  if (header.version !== FORMAT_VERSION) return { ok: false, fault: 'version', header };
  return { ok: true, header };
}

/** Bytes a uvarint of `n` takes. */
export function uvarintSize(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

/** Framed size of a payload of `len` bytes: length prefix + payload + checksum. */
export function frameSize(len: number): number {
  return uvarintSize(len) + len + CHECKSUM_SIZE;
}

/** Writes the record framing `payload` into `out` at `at`; returns the framed size. */
export function encodeRecord(payload: Uint8Array, out: Uint8Array, at: number): number {
  let n = payload.length;
  let p = at;
  while (n >= 0x80) {
    out[p++] = (n & 0x7f) | 0x80;
    n = Math.floor(n / 128);
  }
  out[p++] = n;
  out.set(payload, p);
  p += payload.length;
  viewOf(out).setBigUint64(out.byteOffset + p, xxh64(payload), true);
  return p + CHECKSUM_SIZE - at;
}

/**
 * One DataView over the buffer records were last framed into or checked in:
 * both reuse one buffer (the scratch, the block), so this is nearly always a
 * hit, and the hot paths allocate no view per record.
 */
let lastView: DataView<ArrayBufferLike> = new DataView(new ArrayBuffer(0));
function viewOf(out: Uint8Array): DataView {
  if (lastView.buffer !== out.buffer) lastView = new DataView(out.buffer);
  return lastView;
}

/** A record's frame located in a buffer: where its payload starts and ends. */
export interface RecordFrame {
  payloadStart: number;
  payloadEnd: number;
  /** End of the whole record (after the checksum). */
  end: number;
}

/**
 * Reads a uvarint at `at` without trusting it. Returns the value and its size,
 * `undefined` when `buf` ends inside it, or `null` when it is malformed (more
 * than 10 bytes, or a value past 2^53, which no segment can hold).
 */
export function readUvarint(buf: Uint8Array, at: number, limit: number): { value: number; size: number } | undefined | null {
  let value = 0;
  let scale = 1;
  for (let i = 0; i < MAX_UVARINT_BYTES; i++) {
    if (at + i >= limit) return undefined;
    const b = buf[at + i]!;
    value += (b & 0x7f) * scale;
    if (b < 0x80) return value > Number.MAX_SAFE_INTEGER ? null : { value, size: i + 1 };
    scale *= 128;
  }
  return null;
}

/**
 * Frames the record at `at`, whose data region ends at `limit` (the write
 * cursor, relative to `buf`). `need` means `buf` holds too few bytes to tell;
 * `length` means the length prefix is malformed or runs past `limit`, so the
 * record boundaries behind it are lost too.
 */
export function frameRecord(
  buf: Uint8Array,
  at: number,
  available: number,
  limit: number,
): RecordFrame | 'need' | 'length' {
  // A length of one or two bytes (records under 16 KiB), without the
  // object readUvarint returns; anything else takes the general path.
  const bound = Math.min(available, limit);
  if (at + 1 < bound) {
    const b0 = buf[at]!;
    let size = 0;
    let value = 0;
    if (b0 < 0x80) {
      size = 1;
      value = b0;
    } else if (buf[at + 1]! < 0x80) {
      size = 2;
      value = (b0 & 0x7f) | (buf[at + 1]! << 7);
    }
    if (size > 0) {
      const end = at + size + value + CHECKSUM_SIZE;
      if (end > limit) return 'length';
      if (end > available) return 'need';
      return { payloadStart: at + size, payloadEnd: at + size + value, end };
    }
  }
  const v = readUvarint(buf, at, bound);
  if (v === null) return 'length';
  if (v === undefined) return available < limit ? 'need' : 'length';
  const end = at + v.size + v.value + CHECKSUM_SIZE;
  if (end > limit) return 'length';
  if (end > available) return 'need';
  return { payloadStart: at + v.size, payloadEnd: at + v.size + v.value, end };
}

/** Whether the checksum after the payload matches it. `view`, when given, is a DataView over all of `buf.buffer`. */
export function checksumMatches(buf: Uint8Array, f: RecordFrame, view: DataView = viewOf(buf)): boolean {
  return view.getBigUint64(buf.byteOffset + f.payloadEnd, true) === xxh64(buf.subarray(f.payloadStart, f.payloadEnd));
}
