/**
 * Delivery targets of `ferry forward`. A delivery resolves when the target
 * accepted the records and rejects with a message otherwise; the caller
 * retries the same records (after `fullJitterBackoffMs`, in ../backoff.ts).
 */
import { Pool, type Dispatcher } from 'undici';
import type { RecordRun } from '../spool/popped-run.js';
import { describe } from './common.js';
import { killGroups, runInGroup } from './exec-command.js';

/**
 * The records of one delivery: record `k` is `bytes[starts[k], starts[k] +
 * lengths[k])`, in order (a spool's `PoppedRun` is one; {@link batchOf}
 * makes one from separate records).
 */
export type RecordBatch = RecordRun;

/** `records` as one {@link RecordBatch}, copied back to back. */
export function batchOf(records: readonly Uint8Array[]): RecordBatch {
  let size = 0;
  for (const r of records) size += r.length;
  const bytes = new Uint8Array(size);
  const starts: number[] = [];
  const lengths: number[] = [];
  let at = 0;
  for (const r of records) {
    bytes.set(r, at);
    starts.push(at);
    lengths.push(r.length);
    at += r.length;
  }
  return { bytes, starts, lengths };
}

/** Record `k` of `batch`: a view into its bytes. */
export function recordAt(batch: RecordBatch, k: number): Uint8Array {
  const s = batch.starts[k]!;
  return batch.bytes.subarray(s, s + batch.lengths[k]!);
}

/** Hands records to somewhere else; resolves once they were accepted. */
export type Deliver = (records: RecordBatch) => Promise<void>;

/**
 * How a delivery's records are put into its body (`--format`):
 * - `lines`: each record's bytes as they are, then `\n`;
 * - `json`: each record as one JSON string (its bytes read as UTF-8, a byte
 *   sequence that is not UTF-8 becoming U+FFFD), then `\n`: NDJSON for any input.
 */
export type BodyFormat = 'lines' | 'json';

/** Every `--format` value. */
export const BODY_FORMATS: readonly BodyFormat[] = ['lines', 'json'];

const NEWLINE_BYTE = 0x0a;
// ignoreBOM: a record that starts with a byte-order mark keeps it (U+FEFF), as it keeps every other byte.
const utf8 = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

/**
 * Records as lines: each record, then `\n`. When every record starts past
 * where its line goes (a spool's run has a 12-byte frame header in front of
 * each), the batch's bytes are copied whole and each record moved down into
 * place: a `copyWithin` per record costs about half a view and a `set`.
 */
export function joinLines(batch: RecordBatch): Buffer {
  const { bytes, starts, lengths } = batch;
  const n = starts.length;
  let size = n;
  for (let k = 0; k < n; k++) size += lengths[k]!;
  let inPlace = true;
  for (let k = 0, at = 0; k < n && inPlace; k++) {
    inPlace = starts[k]! >= at;
    at += lengths[k]! + 1;
  }
  if (inPlace && bytes.length >= size) {
    const out = Buffer.allocUnsafe(bytes.length);
    out.set(bytes);
    let at = 0;
    for (let k = 0; k < n; k++) {
      const s = starts[k]!;
      out.copyWithin(at, s, s + lengths[k]!);
      at += lengths[k]!;
      out[at++] = NEWLINE_BYTE;
    }
    return out.subarray(0, at);
  }
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (let k = 0; k < n; k++) {
    out.set(recordAt(batch, k), at);
    at += lengths[k]!;
    out[at++] = NEWLINE_BYTE;
  }
  return out;
}

/** Records as NDJSON: each one a JSON string on its own line. */
export function jsonLines(batch: RecordBatch): Buffer {
  let out = '';
  for (let k = 0; k < batch.starts.length; k++) out += `${JSON.stringify(utf8.decode(recordAt(batch, k)))}\n`;
  return Buffer.from(out, 'utf8');
}

/** The body of one delivery in `format`. */
export function encodeBody(records: RecordBatch, format: BodyFormat): Buffer {
  return format === 'json' ? jsonLines(records) : joinLines(records);
}

/** A delivery to commands; `close()` kills the ones still running (with whatever they started). */
export type ExecDeliver = Deliver & { close(): void };

/**
 * `sh -c cmd` per delivery, the records as its stdin (one per line, in
 * `format`); accepted on exit status 0. Each command runs in a process group
 * of its own (exec-command.ts), and `close()` ends it and its children together.
 */
export function execTarget(cmd: string, format: BodyFormat = 'lines'): ExecDeliver {
  const running = new Set<number>();
  const deliver = (records: RecordBatch) => runInGroup(cmd, encodeBody(records, format), running);
  const close = () => killGroups(running);
  return Object.assign(deliver, { close });
}

/**
 * `url` with everything from the first `:` of its user information to the
 * last `@` shown as `***`. Worked on the text as given, not on what the URL
 * parser makes of it: a password may hold an `@`, and so may a user name (an
 * email address); a raw `/`, `?`, `#` or `\\` in a password, or digits before
 * one, make the parser read a different host, port or path; and the parser
 * drops tabs, line breaks and leading blanks that a pattern on the parsed
 * form would miss. The user information starts after the first `://` when
 * that comes before the last `@`, else at the start. An `@` in a path or
 * query after the host masks more than the password: a message that hides
 * too much is better than one that shows a password.
 */
export function maskPassword(url: string): string {
  const at = url.lastIndexOf('@');
  if (at < 0) return url;
  const slashes = url.indexOf('://');
  const colon = url.indexOf(':', slashes >= 0 && slashes < at ? slashes + 3 : 0);
  return colon >= 0 && colon < at ? `${url.slice(0, colon + 1)}***${url.slice(at)}` : url;
}

/**
 * `text` with the password of every URL in it masked ({@link maskPassword}):
 * for messages that may quote what the user typed (an option commander did
 * not know, a URL given where a file was meant). Each URL runs from its
 * scheme to the next URL's scheme or the end, not to the next blank: a
 * password may hold a space.
 */
export function hideUrlPasswords(text: string): string {
  const starts = [...text.matchAll(/[a-z][a-z0-9+.-]*:\/\//gi)].map((m) => m.index);
  if (starts.length === 0) return text;
  let out = text.slice(0, starts[0]);
  for (let i = 0; i < starts.length; i++) out += maskPassword(text.slice(starts[i], starts[i + 1]));
  return out;
}

/**
 * The bytes a percent-encoded part of a URL stands for: each `%XX` as that
 * byte, everything else as its UTF-8. A user name or password that is not
 * UTF-8 (`%E9` for a Latin-1 é) goes out as its bytes, as curl sends it; a
 * `%` not followed by two hex digits stays as it is.
 */
function percentBytes(s: string): Buffer {
  const parts: Buffer[] = [];
  let from = 0;
  for (const m of s.matchAll(/%[0-9a-f]{2}/gi)) {
    parts.push(Buffer.from(s.slice(from, m.index), 'utf8'), Buffer.of(Number.parseInt(m[0].slice(1), 16)));
    from = m.index + 3;
  }
  parts.push(Buffer.from(s.slice(from), 'utf8'));
  return Buffer.concat(parts);
}

/** Options of {@link httpTarget}. */
export interface HttpTargetOptions {
  /** Most records per delivery; with 1 and `lines`, the body is the record itself. */
  batch: number;
  /** Milliseconds to wait for the answer. */
  timeoutMs: number;
  format?: BodyFormat;
  /** Most connections open at once (deliveries beyond it wait for one); default 1. */
  connections?: number;
}

/** A delivery to an HTTP endpoint; `close()` drops its idle keep-alive connections. */
export type HttpDeliver = Deliver & { close(): void };

/**
 * One HTTP POST per delivery, over at most `connections` keep-alive
 * connections to the URL's origin, through undici's `Pool`, which takes about
 * half the time of Node's `http` client per request (a loop POSTing 200,000
 * lines 100 to a body: 90–100 ms against 160–180 ms). In `lines` format the
 * body is the record itself (`application/octet-stream`) when `batch` is 1,
 * else the records one per line (`text/plain`); in `json` format it is NDJSON
 * (`application/x-ndjson`). A `user:password@` in the URL goes as Basic
 * authorization. Accepted on a 2xx answer, read whole, within `timeoutMs`
 * (only: undici's own timeouts are off). A redirect is not followed: it is a
 * failed delivery (following a 301 or 302 would turn the POST into a GET
 * without the records, and accept that).
 */
export function httpTarget(url: string, o: HttpTargetOptions): HttpDeliver {
  const format = o.format ?? 'lines';
  const { timeoutMs } = o;
  const target = new URL(url);
  // Idle keep-alive connections are unref'd by undici: they do not hold the
  // process open. Capped: a pool without a cap opened a connection for a
  // delivery made right after the one before resolved, while that one's
  // connection was still being handed back. undici's own header and body
  // timeouts (300 s by default) are off: `timeoutMs` alone decides, whatever
  // its size.
  const pool = new Pool(target.origin, { connections: o.connections ?? 1, headersTimeout: 0, bodyTimeout: 0 });
  const path = target.pathname + target.search;
  const credentials = Buffer.concat([percentBytes(target.username), Buffer.from(':'), percentBytes(target.password)]);
  const authorization = target.username || target.password ? `Basic ${credentials.toString('base64')}` : undefined;
  // Failures name the URL with its password masked: they go to stderr and to logs.
  const named = maskPassword(url);
  const deliver = (records: RecordBatch): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const single = format === 'lines' && o.batch === 1 && records.starts.length === 1;
      const type = format === 'json' ? 'application/x-ndjson' : single ? 'application/octet-stream' : 'text/plain';
      const body = single ? recordAt(records, 0) : encodeBody(records, format);
      const headers: Record<string, string> = { 'content-type': type };
      if (authorization !== undefined) headers.authorization = authorization;
      /** The request's controller, once undici started it on a connection. */
      let started: Dispatcher.DispatchController | undefined;
      let status = 0;
      let settled = false;
      const settle = (err?: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (err) reject(err);
        else resolve();
      };
      const timer = setTimeout(() => {
        const late = new Error(`POST ${named}: no answer within ${timeoutMs} ms`);
        settle(late);
        // A request still queued for a connection is aborted when it starts.
        started?.abort(late);
      }, timeoutMs);
      // dispatch with a handler of our own, not `request`: the answer is
      // read and dropped as it comes, without a stream per request (about a
      // quarter of the client's time per POST of 100 lines).
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart(controller) {
          started = controller;
          if (settled) controller.abort(new Error('the deadline passed'));
        },
        onResponseStart(_controller, statusCode) {
          status = statusCode;
        },
        onResponseData() {},
        onResponseEnd() {
          settle(status >= 200 && status <= 299 ? undefined : new Error(`POST ${named}: HTTP ${status}`));
        },
        onResponseError(_controller, err) {
          // trimEnd: some errors (TLS ones from OpenSSL) end in a line break.
          settle(new Error(`POST ${named}: ${describe(err).trimEnd()}`));
        },
      };
      try {
        pool.dispatch({ path, method: 'POST', headers, body }, handler);
      } catch (err) {
        settle(new Error(`POST ${named}: ${describe(err).trimEnd()}`));
      }
    });
  return Object.assign(deliver, { close: () => void pool.destroy().catch(() => {}) });
}
