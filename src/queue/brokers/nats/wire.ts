/**
 * A ferry message as a JetStream message and back. The payload is the
 * message data; the ID travels in `Nats-Msg-Id` (which JetStream also uses
 * for de-duplication), the publish time in `Ferry-Published-At` (ms since the
 * epoch), and each caller header as a header of its own, so `nats stream
 * view` shows them. NATS trims header values and cannot carry CR or LF, so a
 * value is escaped: `%`, CR, LF and whitespace at either end become `%XXXX`
 * (four hex digits of the UTF-16 code unit); reading reverses it exactly.
 */
import { headers as natsHeaders, type MsgHdrs } from '@nats-io/transport-node';
import { InvalidArgumentError } from '../../../errors.js';
import { truncateUtf8 } from '../../dead-letter.js';
import type { StoredMessage } from '../../types.js';

/** Header holding the message ID; JetStream de-duplicates on it. */
export const HEADER_MSG_ID = 'Nats-Msg-Id';
/** Header holding the publish time, ms since the epoch, decimal. */
export const HEADER_PUBLISHED_AT = 'Ferry-Published-At';

/** A header name NATS carries unchanged: an HTTP token. */
const TOKEN_RE = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const RESERVED_RE = /^(nats-|ferry-)/i;

function escapeValue(v: string): string {
  const code = (c: string) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`;
  let s = v.replace(/[%\r\n]/g, code);
  s = s.replace(/^\s+/, (ws) => [...ws].map(code).join(''));
  return s.replace(/\s+$/, (ws) => [...ws].map(code).join(''));
}

function unescapeValue(v: string): string {
  return v.replace(/%([0-9A-F]{4})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
}

/**
 * Checks a message's header names before anything is sent. Throws
 * `InvalidArgumentError` for a name NATS cannot carry (not an HTTP token) or
 * one in the reserved `Nats-` and `Ferry-` ranges.
 */
export function checkHeaderNames(h: Record<string, string> | undefined): void {
  if (h === undefined) return;
  for (const k of Object.keys(h)) {
    if (!TOKEN_RE.test(k)) throw new InvalidArgumentError(`header name ${JSON.stringify(k)} cannot be carried by NATS (letters, digits and !#$%&'*+.^_\`|~- only)`);
    if (RESERVED_RE.test(k)) throw new InvalidArgumentError(`header name ${JSON.stringify(k)} is reserved (Nats-* and Ferry-* belong to the broker and to ferry)`);
  }
}

/**
 * Bytes a caller's headers may take on the wire (`name: value` lines,
 * values escaped): half of the room kept under the server's `max_payload`,
 * so ferry's own headers and a dead-letter copy's six (its error text up to
 * 1 KiB) fit beside them.
 */
export const MAX_CALLER_HEADER_BYTES = 4096;

/** Bytes `h` takes as NATS header lines, values escaped. */
export function headerBytes(h: Record<string, string>): number {
  let n = 0;
  for (const [k, v] of Object.entries(h)) n += k.length + 4 + Buffer.byteLength(escapeValue(v));
  return n;
}

/**
 * `text` cut (at a character boundary) so that its escaped form takes at
 * most `maxBytes`: escaping can make a value five times longer (each `%`,
 * CR or LF becomes `%XXXX`), and a dead-letter copy's error header must fit
 * the room its size was planned for.
 */
export function fitEscaped(text: string, maxBytes: number): string {
  let t = truncateUtf8(text, maxBytes);
  for (;;) {
    const over = Buffer.byteLength(escapeValue(t)) - maxBytes;
    if (over <= 0) return t;
    // A byte cut saves at most five escaped bytes: cut at least over / 5 bytes, and at least one.
    t = truncateUtf8(t, Buffer.byteLength(t) - Math.max(1, Math.ceil(over / 5)));
  }
}

/** The NATS headers of `m` (its ID is passed to publish separately, as `msgID`). */
export function toHeaders(m: StoredMessage): MsgHdrs {
  const h = natsHeaders();
  h.set(HEADER_PUBLISHED_AT, String(m.publishedAt.getTime()));
  if (m.headers) for (const [k, v] of Object.entries(m.headers)) h.set(k, escapeValue(v));
  return h;
}

/** The ferry message stored as (`topic`, `data`, `h`), `fallbackTime` its publish time when the header is missing. */
export function fromWire(topic: string, data: Uint8Array, h: MsgHdrs | undefined, fallbackTime: Date, fallbackId: string): StoredMessage {
  let id = fallbackId;
  let publishedAt = fallbackTime;
  let headers: Record<string, string> | undefined;
  if (h) {
    for (const k of h.keys()) {
      const v = h.get(k);
      if (k === HEADER_MSG_ID) id = v;
      else if (k === HEADER_PUBLISHED_AT) {
        const ms = Number(v);
        if (Number.isFinite(ms)) publishedAt = new Date(ms);
      } else if (!RESERVED_RE.test(k)) (headers ??= {})[k] = unescapeValue(v);
    }
  }
  const m: StoredMessage = { id, topic, payload: data, publishedAt };
  if (headers) m.headers = headers;
  return m;
}
