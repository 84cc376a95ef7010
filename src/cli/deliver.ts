/**
 * Delivery targets of `ferry forward`. A delivery resolves when the target
 * accepted the records and rejects with a message otherwise; the caller
 * retries the same records (after `fullJitterBackoffMs`, in ../backoff.ts).
 */
import { spawn } from 'node:child_process';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
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

const NEWLINE_BYTE = 0x0a;
// ignoreBOM: a record that starts with a byte-order mark keeps it (U+FEFF), as it keeps every other byte.
const utf8 = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

/** Records as lines: each record, then `\n`. */
export function joinLines(records: Uint8Array[]): Buffer {
  let size = records.length;
  for (const r of records) size += r.length;
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const r of records) {
    out.set(r, at);
    at += r.length;
    out[at++] = NEWLINE_BYTE;
  }
  return out;
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

/** A delivery to commands; `close()` kills the ones still running (with whatever they started). */
export type ExecDeliver = Deliver & { close(): void };

/**
 * `sh -c cmd` per delivery, the records as its stdin (one per line, in
 * `format`); accepted on exit status 0. Each command runs in a process group
 * of its own: a Ctrl-C meant for ferry lets it finish (ferry decides when to
 * stop), and `close()` ends it and its children together.
 */
export function execTarget(cmd: string, format: BodyFormat = 'lines'): ExecDeliver {
  const running = new Set<number>();
  const deliver = (records: Uint8Array[]) =>
    new Promise<void>((resolve, reject) => {
      const child = spawn('/bin/sh', ['-c', cmd], { stdio: ['pipe', 'inherit', 'inherit'], detached: true });
      if (child.pid !== undefined) running.add(child.pid);
      child.stdin.on('error', () => {}); // only the exit status decides
      child.on('error', (err) => reject(new Error(`cannot run /bin/sh: ${describe(err)}`)));
      child.on('close', (code, signal) => {
        if (child.pid !== undefined) running.delete(child.pid);
        if (code === 0) resolve();
        else reject(new Error(`--exec command ${signal ? `was killed by ${signal}` : `exited with status ${code}`}`));
      });
      child.stdin.end(encodeBody(records, format));
    });
  const close = () => {
    for (const pid of running) {
      try {
        process.kill(-pid, 'SIGTERM');
      } catch {
        // already gone
      }
    }
  };
  return Object.assign(deliver, { close });
}

/** `url` with the password of its `user:password@` part shown as `***`, whether or not the rest parses as a URL. */
export function maskPassword(url: string): string {
  return url.replace(/^([^:/?#]*:\/*[^/?#@:]*:)[^/?#@]*@/, '$1***@');
}

/** Options of {@link httpTarget}. */
export interface HttpTargetOptions {
  /** Most records per delivery; with 1 and `lines`, the body is the record itself. */
  batch: number;
  /** Milliseconds to wait for the answer. */
  timeoutMs: number;
  format?: BodyFormat;
}

/** A delivery to an HTTP endpoint; `close()` drops its idle keep-alive connections. */
export type HttpDeliver = Deliver & { close(): void };

/**
 * One HTTP POST per delivery, over keep-alive connections (as many as
 * deliveries run at once). In `lines` format the body is the record itself
 * (`application/octet-stream`) when `batch` is 1, else the records one per
 * line (`text/plain`); in `json` format it is NDJSON (`application/x-ndjson`).
 * Accepted on a 2xx answer, whole, within `timeoutMs`. A redirect is not
 * followed: it is a failed delivery (following a 301 or 302 would turn the
 * POST into a GET without the records, and accept that).
 */
export function httpTarget(url: string, o: HttpTargetOptions): HttpDeliver {
  const format = o.format ?? 'lines';
  const { timeoutMs } = o;
  const target = new URL(url);
  const secure = target.protocol === 'https:';
  // Idle keep-alive sockets are unref'd by the agent: they do not hold the process open.
  const agent = secure ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true });
  const send = secure ? httpsRequest : httpRequest;
  // The URL taken apart once: given a URL object, `request` takes it apart on every call.
  const where = {
    protocol: target.protocol,
    hostname: target.hostname.startsWith('[') ? target.hostname.slice(1, -1) : target.hostname,
    port: target.port === '' ? undefined : Number(target.port),
    path: target.pathname + target.search,
    auth: target.username || target.password ? `${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}` : undefined,
  };
  // Failures name the URL with its password masked: they go to stderr and to logs.
  const named = maskPassword(url);
  const deliver = (records: Uint8Array[]) =>
    new Promise<void>((resolve, reject) => {
      const single = format === 'lines' && o.batch === 1 && records.length === 1;
      const type = format === 'json' ? 'application/x-ndjson' : single ? 'application/octet-stream' : 'text/plain';
      const body = single ? records[0]! : encodeBody(records, format);
      let settled = false;
      const finish = (err?: string) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (err === undefined) return resolve();
        req.destroy();
        reject(new Error(`POST ${named}: ${err}`));
      };
      const req = send({ ...where, method: 'POST', agent, headers: { 'content-type': type, 'content-length': body.length } }, (res) => {
        res.on('error', (err) => finish(describe(err)));
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          finish(status >= 200 && status <= 299 ? undefined : `HTTP ${status}`);
        });
        res.resume(); // read the answer to its end so the connection can be reused
      });
      const timer = setTimeout(() => finish(`no answer within ${timeoutMs} ms`), timeoutMs);
      req.on('error', (err) => finish(describe(err)));
      req.end(body);
    });
  return Object.assign(deliver, { close: () => agent.destroy() });
}
