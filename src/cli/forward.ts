/**
 * `ferry forward --dir DIR (--exec CMD | --http URL) [FILE|-]`: the
 * store-and-forward job. Two loops share one spool:
 *
 * - the intake reads lines from FILE (or stdin), appends each with
 *   `appendNoSync`, and makes every batch durable with one `sync`, which
 *   runs while the next batches are read: a line counts as accepted only
 *   after that sync and every earlier one;
 * - the sender (./sender.ts) pops batches, keeps up to `--concurrency`
 *   deliveries outstanding, and commits records in spool order once the
 *   target accepted them and everything before them; a failed delivery is
 *   retried with capped, jittered exponential backoff, for as long as it takes.
 *
 * Killed at any point, a restart on the same directory delivers whatever was
 * accepted and not yet committed (at-least-once). Without input left (end of
 * file) it exits once the spool is empty; SIGINT or SIGTERM stop it early,
 * leaving the backlog for the next run.
 */
import { open as openFd } from 'node:fs';
import { open, stat, type FileHandle } from 'node:fs/promises';
import { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { isFerryError, LockedError } from '../errors.js';
import { DEFAULT_MAX_BYTES, FRAME_OVERHEAD, Spool } from '../spool/index.js';
import type { FileSystem } from '../storage/fs.js';
import { CliError, EXIT_FAILED, EXIT_USAGE, describe, note, summaryLine } from './common.js';
import { EXIT_HANGUP, EXIT_INTERRUPTED } from './drain-delivery.js';
import { FramingError, LineSplitter, recordLimit, type LineRun } from './framing.js';
import { BODY_FORMATS, execTarget, httpTarget, type BodyFormat } from './deliver.js';
import { runSender } from './sender.js';
import { OrderedSyncs } from './ordered-syncs.js';
import { cursorUnwritable, cursorWriteFailed, noteOpenLosses } from './spool-dir.js';

/** Options of `ferry forward`, as parsed from the command line. */
export interface ForwardOptions {
  dir: string;
  exec?: string;
  http?: string;
  /** Records per delivery. */
  batch?: number;
  /** How records go into a delivery: `lines` (default) or `json`. */
  format?: string;
  /** Most deliveries outstanding at once (default {@link DEFAULT_HTTP_CONCURRENCY} with `http`, 1 with `exec`). */
  concurrency?: number;
  /** Lines per group commit on the intake side. */
  syncBatch?: number;
  timeoutMs?: number;
  retryBaseMs?: number;
  retryMaxMs?: number;
  maxBytes?: number;
  segmentBytes?: number;
  quiet?: boolean;
  /** @internal The spool's file system (tests inject faults through it). */
  fs?: FileSystem;
  /** @internal Milliseconds a full intake waits for a commit before it tries again (default {@link FULL_POLL_MS}). */
  fullPollMs?: number;
}

export const DEFAULT_FORWARD_BATCH = 1;
/** Deliveries outstanding at once with `--http` unless `--concurrency` says otherwise. */
export const DEFAULT_HTTP_CONCURRENCY = 4;
export const DEFAULT_SYNC_BATCH = 1000;
export const DEFAULT_TIMEOUT_MS = 10_000;
export const DEFAULT_RETRY_BASE_MS = 100;
export const DEFAULT_RETRY_MAX_MS = 30_000;

interface Counts {
  in: number;
  out: number;
  retries: number;
  lastError: string;
  damaged: number;
}

/** Failure reasons printed at most this often when no status line shows them. */
const ERROR_NOTE_MS = 10_000;

/**
 * Without the status line (no terminal, or `--quiet`) a delivery that keeps
 * failing would retry in silence: print its reason, at most once per
 * {@link ERROR_NOTE_MS} (and whenever it changes) so a log is not flooded.
 */
function errorNotes(enabled: boolean): (reason: string) => void {
  if (!enabled) return () => {};
  let last = '';
  let at = -Infinity;
  return (reason) => {
    const now = performance.now();
    if (reason === last && now - at < ERROR_NOTE_MS) return;
    last = reason;
    at = now;
    note(`ferry: delivery failed, retrying: ${reason}`);
  };
}

/** The system error code (`ENOSPC`, ...) of `err` or of an error in its `cause` chain. */
export function systemCode(err: unknown): string | undefined {
  for (let e = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code === 'string' && /^E[A-Z0-9]+$/.test(code) && !code.startsWith('ERR_')) return code;
  }
  return undefined;
}

/** The error that ends a forward whose intake failed; a full disk is named as such, with what to do. */
function intakeFailure(err: unknown, input: string, dir: string, accepted: number): CliError {
  const code = systemCode(err);
  if (code === 'ENOSPC' || code === 'EDQUOT') {
    const what = code === 'ENOSPC' ? 'the disk holding the spool is full' : 'the disk quota of the spool is used up';
    return new CliError(
      `${dir}: ${what} (${code}); reading ${input} stopped, and the first ${accepted} lines were accepted (some after them may have been stored and delivered too). ` +
        `Free some space there, or give --dir a spool on another disk, then run the same command again (lines already delivered may arrive twice)`,
      EXIT_FAILED,
    );
  }
  return new CliError(`reading ${input} stopped: ${describe(err)}; ${accepted} lines were accepted before it`, EXIT_FAILED);
}

/** Why `--http URL` cannot be used, or undefined when it can. */
export function badHttpUrl(url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'not a valid URL';
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return 'needs an http:// or https:// URL';
  // The URL parser takes the first path segment of `http:///path` or
  // `http:/path` for the host ("path"): a delivery there would retry forever.
  if (u.hostname === '' || !/^https?:\/\/[^/?#\\]/i.test(url.trim())) return 'has no host (write http://HOST[:PORT]/PATH)';
  return undefined;
}

async function openInput(file: string | undefined): Promise<{ stream: Readable; name: string; close(): Promise<void> }> {
  if (file === undefined || file === '-') return { stream: process.stdin, name: 'stdin', close: async () => void process.stdin.destroy() };
  if (await isPipe(file)) return openPipe(file);
  let fh: FileHandle;
  try {
    fh = await open(file, 'r');
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${describe(err)}`, EXIT_USAGE);
  }
  if ((await fh.stat()).isDirectory()) {
    await fh.close();
    throw new CliError(`cannot read ${file}: it is a directory`, EXIT_USAGE);
  }
  const stream = fh.createReadStream({ highWaterMark: 256 * 1024, autoClose: false });
  return {
    stream,
    name: file,
    close: async () => {
      stream.destroy();
      await fh.close();
    },
  };
}

/** Whether `file` is a named pipe (a FIFO, or `/dev/stdin` fed by one); false when it cannot be looked at (the open says why). */
async function isPipe(file: string): Promise<boolean> {
  try {
    return (await stat(file)).isFIFO();
  } catch {
    return false;
  }
}

/**
 * A named pipe read as a socket, as Node reads a piped stdin: its reads wait
 * in the event loop, so a stop can end one at once. (A file stream's read
 * waits in the thread pool, where nothing can cut it short: a signal would
 * then wait for the writer's next line, and the exit for the writer to close.)
 * The open still waits for a writer, as a plain open of a FIFO does.
 */
async function openPipe(file: string): Promise<{ stream: Readable; name: string; close(): Promise<void> }> {
  let fd: number;
  try {
    fd = await new Promise<number>((resolve, reject) => openFd(file, 'r', (err, n) => (err ? reject(err) : resolve(n))));
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${describe(err)}`, EXIT_USAGE);
  }
  const stream = new Socket({ fd, readable: true, writable: false });
  return { stream, name: file, close: async () => void stream.destroy() };
}

/** How long an intake that found the spool full waits for a commit before it tries again. */
export const FULL_POLL_MS = 50;

/**
 * Room in a full spool: the sender calls `committed()` after each commit
 * (the head moved), and an intake waiting for room wakes at once rather than
 * at its next look (a full spool of 300 KB moved about 3 MB/s with a look
 * every 50 ms). `commits` lets a waiter tell whether one came since it
 * looked: `wait(seen)` resolves at once when it did.
 */
function roomForIntake(pollMs: number) {
  let commits = 0;
  let wake: (() => void) | undefined;
  return {
    get commits() {
      return commits;
    },
    committed(): void {
      commits++;
      wake?.();
    },
    wait(seen: number, stop: AbortSignal): Promise<void> {
      if (commits !== seen || stop.aborted) return Promise.resolve();
      return new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          stop.removeEventListener('abort', done);
          wake = undefined;
          resolve();
        };
        const timer = setTimeout(done, pollMs);
        stop.addEventListener('abort', done, { once: true });
        wake = done;
      });
    },
  };
}
type Room = ReturnType<typeof roomForIntake>;

/** Syncs the intake may have started and not seen resolve before it waits for the oldest. */
const SYNCS_AHEAD = 4;

/**
 * Appends every line, one sync per batch; waits out a full spool. A batch's
 * sync runs while the next batches are appended: the intake waits for a
 * sync only when {@link SYNCS_AHEAD} are outstanding, so fdatasyncs overlap
 * the appends instead of taking turns with them, and syncs asked for while
 * one runs share the next (group commit). A line is counted in `counts.in`
 * once a sync covering it, and every older one, resolved (OrderedSyncs);
 * the first failed sync ends the intake.
 */
async function intake(spool: Spool, input: Readable, syncBatch: number, maxLineBytes: number, counts: Counts, stop: AbortSignal, room: Room): Promise<void> {
  const splitter = new LineSplitter(maxLineBytes);
  /** Lines appended and not yet covered by a sync that was started. */
  let pending = 0;
  const syncs = new OrderedSyncs(() => spool.sync(), (n) => void (counts.in += n), SYNCS_AHEAD);
  /** Starts a sync for the pending lines. */
  const queueSync = () => {
    syncs.start(pending);
    pending = 0;
  };
  /** Starts a sync for the pending lines; waits for the oldest one while too many are outstanding. */
  const startSync = async () => {
    queueSync();
    await syncs.throttle();
  };
  const flush = async () => {
    queueSync();
    await syncs.drain();
  };
  /**
   * Appends `line` after `appendNoSync` refused it with `err`: waits out a
   * full spool. `seen` is the sender's commit count before the refused append.
   */
  const putFull = async (line: Uint8Array, err: unknown, seen: number) => {
    for (;;) {
      if (!isFerryError(err, 'ERR_FULL')) throw err; // not ERR_EXCEEDS_CAP: waiting cannot make that record fit
      // Backpressure: make what is pending durable, then wait for the sender to free space.
      await flush();
      await room.wait(seen, stop);
      if (stop.aborted) throw err;
      seen = room.commits;
      try {
        await spool.appendNoSync(line);
        return;
      } catch (again) {
        err = again;
      }
    }
  };
  /**
   * Appends `count` records, up to the next sync's worth per call
   * (`append(i, j)` places records i to j − 1): one promise per group of
   * lines rather than one per line. A line the spool refused (full) waits
   * alone for room (`record(i)` is that line), then the rest of its group
   * goes on.
   */
  const putRecords = async (count: number, append: (i: number, j: number) => Promise<void>, record: (i: number) => Uint8Array) => {
    for (let i = 0; i < count; ) {
      const j = Math.min(count, i + Math.max(1, syncBatch - pending));
      const seen = room.commits;
      try {
        await append(i, j);
        pending += j - i;
        i = j;
      } catch (err) {
        const placed = isFerryError(err) ? (err.placed ?? 0) : 0;
        i += placed;
        pending += placed;
        await putFull(record(i), err, seen);
        i++;
        pending++;
      }
      if (pending >= syncBatch) await startSync();
    }
  };
  const putAll = (lines: readonly Uint8Array[]) =>
    putRecords(lines.length, (i, j) => spool.appendBatchNoSync(lines.slice(i, j)), (i) => lines[i]!);
  // Lines as runs over the chunk they were read in: no object per line (appendRunNoSync).
  const putRuns = async (runs: readonly LineRun[]) => {
    for (const run of runs) {
      await putRecords(run.starts.length, (i, j) => spool.appendRunNoSync(run, i, j), (i) => run.bytes.subarray(run.starts[i]!, run.starts[i]! + run.lengths[i]!));
    }
  };
  try {
    for await (const chunk of input as AsyncIterable<Buffer>) {
      let runs: LineRun[];
      try {
        runs = splitter.pushRuns(chunk);
      } catch (err) {
        // A line over the record limit: the lines before it in this chunk are good; accept them, then stop.
        if (!(err instanceof FramingError)) throw err;
        await putAll(err.records);
        await flush();
        throw err;
      }
      await putRuns(runs);
      // A pipe's lines should not wait for a full batch to become durable:
      // their sync starts now and runs while the next chunk is read.
      await startSync();
      if (stop.aborted) return await flush();
    }
    await putAll(splitter.end());
    await flush();
  } catch (err) {
    // Stopped by a signal while waiting for a pipe: forward destroyed the
    // input itself, which ends the read as a premature close. A stop, not a failure.
    if (stop.aborted && (err as { code?: unknown }).code === 'ERR_STREAM_PREMATURE_CLOSE') return await flush();
    // The lines placed before the failure (a line the spool can never hold,
    // one over the record limit) are synced too, and every line whose sync
    // lands counts as accepted before the failure is reported: the sender
    // may deliver them already.
    queueSync();
    await syncs.settle();
    throw err;
  }
}

/** A status line on a terminal, redrawn a few times a second. */
function statusLine(spool: Spool, counts: Counts, enabled: boolean): () => void {
  if (!enabled || !process.stderr.isTTY) return () => {};
  const draw = () => {
    const err = counts.lastError ? ` | last error: ${counts.lastError.slice(0, 60)}` : '';
    process.stderr.write(`\r\x1b[Kforward: in ${counts.in} | out ${counts.out} | backlog ${spool.bytes} B | retries ${counts.retries}${err}`);
  };
  const timer = setInterval(draw, 250);
  return () => {
    clearInterval(timer);
    draw();
    process.stderr.write('\n');
  };
}

/** Runs `ferry forward`; resolves to the exit status. */
export async function forward(file: string | undefined, o: ForwardOptions): Promise<number> {
  if ((o.exec === undefined) === (o.http === undefined)) throw new CliError('give exactly one of --exec CMD and --http URL', EXIT_USAGE);
  const bad = o.http !== undefined ? badHttpUrl(o.http) : undefined;
  // The CLI masks the password as it prints the message (hideUrlPasswords).
  if (bad) throw new CliError(`--http ${bad}: got ${JSON.stringify(o.http)}`, EXIT_USAGE);
  // An empty command would "deliver" every record to nowhere.
  if (o.exec !== undefined && o.exec.trim() === '') throw new CliError('--exec needs a command', EXIT_USAGE);
  if (o.format !== undefined && !BODY_FORMATS.includes(o.format as BodyFormat)) {
    throw new CliError(`--format must be one of ${BODY_FORMATS.join(', ')}: got ${JSON.stringify(o.format)}`, EXIT_USAGE);
  }
  // A cap below one frame's overhead holds no line at all, not even an empty one.
  if (o.maxBytes !== undefined && o.maxBytes !== 0 && o.maxBytes < FRAME_OVERHEAD + 1) {
    throw new CliError(`--max-bytes must be 0 (the default cap) or at least ${FRAME_OVERHEAD + 1}, room for a one-byte line and its ${FRAME_OVERHEAD}-byte frame: got ${o.maxBytes}`, EXIT_USAGE);
  }
  const started = performance.now();
  const input = await openInput(file);
  let spool: Spool;
  try {
    spool = await Spool.open(o.dir, { maxBytes: o.maxBytes, segmentBytes: o.segmentBytes, fs: o.fs });
  } catch (err) {
    await input.close();
    if (err instanceof LockedError) throw new CliError(`${o.dir} is locked: another process has this spool open`, EXIT_USAGE);
    throw new CliError(`cannot open spool ${o.dir}: ${describe(err)}`, EXIT_USAGE);
  }
  if (spool.cursorError) {
    const refused = cursorUnwritable(o.dir, spool.cursorError);
    await Promise.allSettled([spool.close(), input.close()]);
    throw refused;
  }
  const format = (o.format ?? 'lines') as BodyFormat;
  const concurrency = o.concurrency ?? (o.http !== undefined ? DEFAULT_HTTP_CONCURRENCY : 1);
  const http =
    o.http !== undefined ? httpTarget(o.http, { batch: o.batch ?? DEFAULT_FORWARD_BATCH, timeoutMs: o.timeoutMs ?? DEFAULT_TIMEOUT_MS, format, connections: concurrency }) : undefined;
  const deliver = http ?? execTarget(o.exec!, format);
  const counts: Counts = { in: 0, out: 0, retries: 0, lastError: '', damaged: 0 };
  counts.damaged += noteOpenLosses(o.dir, spool, true);
  // A line longer than one record of the spool can ever be is refused as it passes that length, not read whole first.
  const cap = o.maxBytes === undefined || o.maxBytes === 0 ? DEFAULT_MAX_BYTES : o.maxBytes;
  const maxLineBytes = Math.max(0, Math.min(recordLimit(), cap - FRAME_OVERHEAD));
  const stop = new AbortController();
  // The first signal stops reading and lets deliveries under way finish
  // (they may wait up to --timeout-ms, or for a hung --exec command); a
  // second one exits at once. Nothing accepted is lost either way: what was
  // not committed is delivered by the next run.
  const onSignal = () => {
    if (stop.signal.aborted) {
      deliver.close(); // an --exec command still running ends with this process
      process.exit(EXIT_INTERRUPTED);
    }
    stop.abort();
  };
  // A hangup (the terminal closed) would not reach --exec commands, which run
  // in process groups of their own: it ends them and exits, as a second signal does.
  const onHangup = () => {
    deliver.close();
    process.exit(EXIT_HANGUP);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('SIGHUP', onHangup);
  const endStatus = statusLine(spool, counts, !o.quiet);
  let done = false;
  let failure: CliError | undefined;
  try {
    const room = roomForIntake(o.fullPollMs ?? FULL_POLL_MS);
    const producing = intake(spool, input.stream, o.syncBatch ?? DEFAULT_SYNC_BATCH, maxLineBytes, counts, stop.signal, room).then(
      () => void (done = true),
      (err) => {
        done = true;
        failure = intakeFailure(err, input.name, o.dir, counts.in);
      },
    );
    await runSender(spool, deliver, { batch: o.batch ?? DEFAULT_FORWARD_BATCH, concurrency, retryBaseMs: o.retryBaseMs ?? DEFAULT_RETRY_BASE_MS, retryMaxMs: o.retryMaxMs ?? DEFAULT_RETRY_MAX_MS }, counts, stop.signal, { done: () => done, ended: producing, committed: room.committed }, errorNotes(o.quiet === true || !process.stderr.isTTY), (err) => note(`ferry: skipped damaged data: ${describe(err)}`));
    if (stop.signal.aborted) input.stream.destroy();
    await producing;
  } catch (err) {
    failure ??= new CliError(`forward failed: ${describe(err)}`, EXIT_FAILED);
  } finally {
    endStatus();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.off('SIGHUP', onHangup);
    deliver.close();
    await spool.close().catch((err) => {
      failure ??= new CliError(`closing the spool failed: ${describe(err)}`);
    });
    await input.close();
  }
  if (failure) throw failure;
  if (!o.quiet) {
    note(summaryLine('forwarded', counts.out, 0, started).replace(' (0 B)', ''));
    note(`ferry: accepted ${counts.in} lines, ${counts.retries} retries, ${spool.bytes} bytes left in the spool`);
  }
  if (counts.damaged > 0) throw new CliError(`${counts.damaged} damaged span(s) of the spool were skipped; their records are lost (each is named above)`, EXIT_FAILED);
  // Commits advanced only in memory: the next run delivers those records again.
  const cursorError = spool.cursorError;
  if (cursorError) throw cursorWriteFailed(o.dir, cursorError);
  return stop.signal.aborted ? EXIT_INTERRUPTED : 0;
}
