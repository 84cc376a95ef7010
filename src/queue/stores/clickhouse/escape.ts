/**
 * The one place where values become ClickHouse SQL text. ClickHouse 18.16
 * (Debian's server) has no query parameters, so every value the store sends
 * is spliced into the statement as a literal made here; nothing else builds
 * literals. Audited rules:
 *
 * - A string literal is `'…'`. Inside, `'` is written `\'` and `\` is written
 *   `\\`; every byte below 0x20, 0x7F, and every byte of a lone surrogate is
 *   written `\xHH`. Other characters are sent as themselves (the client
 *   encodes the statement as UTF-8), so no other character can end the literal
 *   or start an escape.
 * - Strings are stored as WTF-8: UTF-8, except that a lone surrogate (legal in
 *   a JavaScript string, not in UTF-8) is kept as its 3-byte encoding instead
 *   of being replaced. `decodeWtf8` turns the bytes back into the same string,
 *   so every JavaScript string round-trips.
 * - Bytes (`Uint8Array`) are a string literal of those exact bytes: printable
 *   ASCII as itself (quote and backslash escaped), everything else `\xHH`.
 * - Numbers must be non-negative safe integers (the store's columns are
 *   UInt8…UInt64); anything else throws rather than reach the server.
 * - `null` is `NULL`; arrays are `[a, b, …]` of literals.
 */
import { InvalidArgumentError } from '../../../errors.js';

/** A value `literal` accepts. */
export type SqlValue = string | number | Uint8Array | null | readonly SqlValue[];

const HEX = Array.from({ length: 256 }, (_, i) => `\\x${i.toString(16).padStart(2, '0').toUpperCase()}`);

/** `\xHH` escapes of the WTF-8 bytes of one surrogate code unit (0xD800–0xDFFF). */
function loneSurrogate(unit: number): string {
  return HEX[0xe0 | (unit >> 12)]! + HEX[0x80 | ((unit >> 6) & 0x3f)]! + HEX[0x80 | (unit & 0x3f)]!;
}

/** A string literal holding the WTF-8 bytes of `s`. */
export function stringLiteral(s: string): string {
  let out = "'";
  let run = 0; // start of the pending run of characters sent as themselves
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    let esc: string | undefined;
    if (c === 0x27) esc = "\\'";
    else if (c === 0x5c) esc = '\\\\';
    else if (c < 0x20 || c === 0x7f) esc = HEX[c];
    else if (c >= 0xd800 && c <= 0xdfff) {
      const next = i + 1 < s.length ? s.charCodeAt(i + 1) : 0;
      if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        i++; // a proper pair: sent as itself
        continue;
      }
      esc = loneSurrogate(c);
    }
    if (esc === undefined) continue;
    out += s.slice(run, i) + esc;
    run = i + 1;
  }
  return out + s.slice(run) + "'";
}

/** A string literal of exactly `bytes`. */
export function bytesLiteral(bytes: Uint8Array): string {
  const parts: string[] = ["'"];
  let run = '';
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (b >= 0x20 && b < 0x7f && b !== 0x27 && b !== 0x5c) run += String.fromCharCode(b);
    else {
      if (run) parts.push(run), (run = '');
      parts.push(HEX[b]!);
    }
    if (run.length >= 4096) parts.push(run), (run = '');
  }
  if (run) parts.push(run);
  parts.push("'");
  return parts.join('');
}

/**
 * The SQL literal of `v` (see the rules above).
 * @throws InvalidArgumentError a number that is not a non-negative safe integer, or a value of another type.
 */
export function literal(v: SqlValue): string {
  if (typeof v === 'string') return stringLiteral(v);
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v) || v < 0) throw new InvalidArgumentError(`clickhouse store: ${v} is not a non-negative integer`);
    return String(v);
  }
  if (v === null) return 'NULL';
  if (v instanceof Uint8Array) return bytesLiteral(v);
  if (Array.isArray(v)) return `[${v.map(literal).join(', ')}]`;
  throw new InvalidArgumentError(`clickhouse store: cannot write a ${typeof v} as SQL`);
}

/** A row of literals for `INSERT … VALUES`: `(a, b, …)`. */
export function tuple(values: readonly SqlValue[]): string {
  return `(${values.map(literal).join(', ')})`;
}

/**
 * Decodes WTF-8 bytes (as `stringLiteral` stores them, read back with
 * `hex(column)`) into the original string. Invalid sequences become U+FFFD,
 * as in a UTF-8 decoder.
 */
export function decodeWtf8(bytes: Uint8Array): string {
  let out = '';
  let chunk: number[] = [];
  const flush = () => {
    out += String.fromCharCode(...chunk);
    chunk = [];
  };
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i]!;
    let cp = 0xfffd;
    let len = 1;
    if (b < 0x80) cp = b;
    else if (b >= 0xc2 && b < 0xe0 && cont(bytes, i + 1)) {
      cp = ((b & 0x1f) << 6) | (bytes[i + 1]! & 0x3f);
      len = 2;
    } else if (b >= 0xe0 && b < 0xf0 && cont(bytes, i + 1) && cont(bytes, i + 2)) {
      const v = ((b & 0x0f) << 12) | ((bytes[i + 1]! & 0x3f) << 6) | (bytes[i + 2]! & 0x3f);
      if (v >= 0x800) {
        cp = v; // surrogates included: that is the WTF-8 extension
        len = 3;
      }
    } else if (b >= 0xf0 && b < 0xf5 && cont(bytes, i + 1) && cont(bytes, i + 2) && cont(bytes, i + 3)) {
      const v = ((b & 0x07) << 18) | ((bytes[i + 1]! & 0x3f) << 12) | ((bytes[i + 2]! & 0x3f) << 6) | (bytes[i + 3]! & 0x3f);
      if (v >= 0x10000 && v <= 0x10ffff) {
        cp = v;
        len = 4;
      }
    }
    if (cp >= 0x10000) chunk.push(0xd800 + ((cp - 0x10000) >> 10), 0xdc00 + ((cp - 0x10000) & 0x3ff));
    else chunk.push(cp);
    if (chunk.length >= 8192) flush();
    i += len;
  }
  flush();
  return out;
}

function cont(bytes: Uint8Array, i: number): boolean {
  return i < bytes.length && (bytes[i]! & 0xc0) === 0x80;
}

/** Bytes from the `hex(column)` text ClickHouse returns. */
export function fromHex(hex: string): Uint8Array {
  const b = Buffer.from(hex, 'hex');
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}
