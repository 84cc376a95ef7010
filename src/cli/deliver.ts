/**
 * Delivery targets of `ferry forward`, and the retry schedule between
 * attempts. A delivery resolves when the target accepted the records and
 * rejects with a message otherwise; the caller retries the same records.
 */
import { spawn } from 'node:child_process';
import { describe } from './common.js';

/** Hands records to somewhere else; resolves once they were accepted. */
export type Deliver = (records: Uint8Array[]) => Promise<void>;

/**
 * How a delivery's records are put into its body (`--format`):
 * - `lines`: each record's bytes as they are, then `\n`;
 * - `json`: each record as one JSON string (its bytes read as UTF-8, a byte
 *   sequence that is not UTF-8 becoming U+FFFD), then `\n`: NDJSON for any input.
 */
export type BodyFormat = 'lines' | 'json';

/** Every `--format` value. */
export const BODY_FORMATS: readonly BodyFormat[] = ['lines', 'json'];

const NEWLINE = Buffer.from('\n');
const utf8 = new TextDecoder('utf-8', { fatal: false });

/** Records as lines: each record, then `\n`. */
export function joinLines(records: Uint8Array[]): Buffer {
  const parts: Buffer[] = [];
  for (const r of records) parts.push(Buffer.from(r.buffer, r.byteOffset, r.length), NEWLINE);
  return Buffer.concat(parts);
}

/** Records as NDJSON: each one a JSON string on its own line. */
export function jsonLines(records: Uint8Array[]): Buffer {
  let out = '';
  for (const r of records) out += `${JSON.stringify(utf8.decode(r))}\n`;
  return Buffer.from(out, 'utf8');
}

/** The body of one delivery in `format`. */
export function encodeBody(records: Uint8Array[], format: BodyFormat): Buffer {
  return format === 'json' ? jsonLines(records) : joinLines(records);
}

/** `sh -c cmd` per delivery, the records as its stdin (one per line, in `format`); accepted on exit status 0. */
export function execTarget(cmd: string, format: BodyFormat = 'lines'): Deliver {
  return (records) =>
    new Promise((resolve, reject) => {
      const child = spawn('/bin/sh', ['-c', cmd], { stdio: ['pipe', 'inherit', 'inherit'] });
      child.stdin.on('error', () => {}); // only the exit status decides
      child.on('error', (err) => reject(new Error(`cannot run /bin/sh: ${describe(err)}`)));
      child.on('close', (code, signal) => {
        if (code === 0) resolve();
        else reject(new Error(`--exec command ${signal ? `was killed by ${signal}` : `exited with status ${code}`}`));
      });
      child.stdin.end(encodeBody(records, format));
    });
}

/** Options of {@link httpTarget}. */
export interface HttpTargetOptions {
  /** Most records per delivery; with 1 and `lines`, the body is the record itself. */
  batch: number;
  /** Milliseconds to wait for the answer. */
  timeoutMs: number;
  format?: BodyFormat;
}

/**
 * One HTTP POST per delivery. In `lines` format the body is the record
 * itself (`application/octet-stream`) when `batch` is 1, else the records
 * one per line (`text/plain`); in `json` format it is NDJSON
 * (`application/x-ndjson`). Accepted on any 2xx answer within `timeoutMs`.
 */
export function httpTarget(url: string, o: HttpTargetOptions): Deliver {
  const format = o.format ?? 'lines';
  const { timeoutMs } = o;
  return async (records) => {
    const single = format === 'lines' && o.batch === 1 && records.length === 1;
    const type = format === 'json' ? 'application/x-ndjson' : single ? 'application/octet-stream' : 'text/plain';
    let res: Response;
    try {
      res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': type },
        body: single ? records[0]! : encodeBody(records, format),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      const e = err as Error;
      const why = e.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : describe((e.cause as Error | undefined) ?? e);
      throw new Error(`POST ${url}: ${why}`);
    }
    await res.arrayBuffer().catch(() => undefined); // drain the body so the connection can be reused
    if (res.status < 200 || res.status > 299) throw new Error(`POST ${url}: HTTP ${res.status}`);
  };
}

/**
 * Capped exponential backoff with full jitter: attempt n (from 1) waits a
 * uniformly random time in [0, min(cap, base · 2^(n−1))], so many senders
 * that failed together do not retry together.
 */
export function backoffMs(attempt: number, baseMs: number, capMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(capMs, baseMs * 2 ** Math.min(attempt - 1, 30));
  return Math.round(random() * ceiling);
}
