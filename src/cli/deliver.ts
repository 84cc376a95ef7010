/**
 * Delivery targets of `ferry forward`, and the retry schedule between
 * attempts. A delivery resolves when the target accepted the records and
 * rejects with a message otherwise; the caller retries the same records.
 */
import { spawn } from 'node:child_process';
import { describe } from './common.js';

/** Hands records to somewhere else; resolves once they were accepted. */
export type Deliver = (records: Uint8Array[]) => Promise<void>;

/** Records as NDJSON-style lines: each record, then `\n`. */
export function joinLines(records: Uint8Array[]): Buffer {
  const parts: Buffer[] = [];
  for (const r of records) parts.push(Buffer.from(r.buffer, r.byteOffset, r.length), Buffer.from('\n'));
  return Buffer.concat(parts);
}

/** `sh -c cmd` per delivery, the records as its stdin (one per line); accepted on exit status 0. */
export function execTarget(cmd: string): Deliver {
  return (records) =>
    new Promise((resolve, reject) => {
      const child = spawn('/bin/sh', ['-c', cmd], { stdio: ['pipe', 'inherit', 'inherit'] });
      child.stdin.on('error', () => {}); // only the exit status decides
      child.on('error', (err) => reject(new Error(`cannot run /bin/sh: ${describe(err)}`)));
      child.on('close', (code, signal) => {
        if (code === 0) resolve();
        else reject(new Error(`--exec command ${signal ? `was killed by ${signal}` : `exited with status ${code}`}`));
      });
      child.stdin.end(joinLines(records));
    });
}

/**
 * One HTTP POST per delivery: the record itself when `batch` is 1, else the
 * records as NDJSON. Accepted on any 2xx answer within `timeoutMs`.
 */
export function httpTarget(url: string, batch: number, timeoutMs: number): Deliver {
  return async (records) => {
    const single = batch === 1 && records.length === 1;
    let res: Response;
    try {
      res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': single ? 'application/octet-stream' : 'application/x-ndjson' },
        body: single ? records[0]! : joinLines(records),
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
