/**
 * Shared by `ferry/diskqueue` and `ferry/queue`, and exported from both.
 *
 * Codecs turn a value into a record's payload and back. A codec must not call
 * back into the queue. In the disk queue `decode` gets a private copy of the
 * bytes that stays valid only until the reader's next read; copy out of it to
 * keep it longer. In `ferry/queue` it gets the delivery's own bytes.
 */
import { CodecError } from './errors.js';

/** Encodes values of type T to bytes and back; throw to refuse (it becomes a `CodecError`). */
export interface Codec<T> {
  encode(value: T): Uint8Array;
  decode(bytes: Uint8Array): T;
  /**
   * True when `decode` never returns a value that aliases its input (it copies
   * or parses). The reader then skips its private copy of the record.
   */
  readonly decodeCopies?: boolean;
}

const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder('utf-8', { fatal: true });

/** Payloads up to this size are copied into a shared slab rather than memory of their own. */
const SLAB_MAX = 1024;
const SLAB_SIZE = 8192;
let slab = new ArrayBuffer(SLAB_SIZE);
let slabUsed = 0;

/**
 * A copy of `b` that outlives the reader's buffer. Small copies are views into
 * an 8 KiB slab shared with other small values, the way Node's Buffer pool
 * works: allocating a backing store per value costs more than the copy at
 * these sizes. A value's `.buffer` is therefore not its own; its bytes are.
 * Large copies skip the zero-fill a plain `new Uint8Array` pays (the bytes are
 * overwritten at once anyway).
 */
function copyBytes(b: Uint8Array): Uint8Array {
  const n = b.length;
  if (n <= SLAB_MAX) {
    if (slabUsed + n > SLAB_SIZE) {
      slab = new ArrayBuffer(SLAB_SIZE);
      slabUsed = 0;
    }
    const out = new Uint8Array(slab, slabUsed, n);
    slabUsed += (n + 7) & ~7;
    out.set(b);
    return out;
  }
  const mem = Buffer.allocUnsafeSlow(n);
  mem.set(b);
  return new Uint8Array(mem.buffer, mem.byteOffset, mem.length);
}

/**
 * Raw bytes. `decode` returns a copy, so the value outlives the next read.
 * A value of up to 1 KiB is a view into an 8 KiB slab shared with other
 * small values (as Node's `Buffer.allocUnsafe` pool does): its bytes are its
 * own, but its `.buffer` is not; use `value.slice()` for an `ArrayBuffer` of
 * its own.
 */
const bytes: Codec<Uint8Array> = {
  encode(value) {
    if (!(value instanceof Uint8Array)) throw new CodecError('codecs.bytes encodes Uint8Array values only');
    return value;
  },
  decode: copyBytes,
  decodeCopies: true,
};

/** UTF-8 strings; invalid UTF-8 on read is a `CodecError`. */
const utf8: Codec<string> = {
  encode(value) {
    if (typeof value !== 'string') throw new CodecError('codecs.utf8 encodes strings only');
    return textEncoder.encode(value);
  },
  decode: (b) => textDecoder.decode(b),
  decodeCopies: true,
};

/** Any JSON-serialisable value, as UTF-8 JSON text. */
const json: Codec<unknown> = {
  encode(value) {
    const text = JSON.stringify(value);
    if (text === undefined) throw new CodecError('value is not JSON-serialisable');
    return textEncoder.encode(text);
  },
  decode: (b) => JSON.parse(textDecoder.decode(b)),
  decodeCopies: true,
};

/** The codecs ferry ships: `bytes` (the default), `utf8` and `json`. */
export const codecs = { bytes, utf8, json: json as Codec<any> };
