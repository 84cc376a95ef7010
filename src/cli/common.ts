/**
 * What every command shares: exit codes, the error that carries one, opening
 * a queue the way a command line means it, and the one-line summaries.
 */
import type { Stats } from 'node:fs';
import { stat } from 'node:fs/promises';
import { InvalidArgumentError } from 'commander';
import { DiskQueue, LockedError, SegmentSizeMismatchError, type DiskQueueOptions, type DiskQueueStats } from '../diskqueue/index.js';
import { MAX_TIMER_MS } from '../queue/options.js';
import { danglingLinkError, fileKind } from '../regular-file.js';

/** Payload bytes after which push stores, and drain writes, a batch before it reaches its record count. */
export const BATCH_BYTES = 4 * 1024 * 1024;

// Exit statuses (docs/CLI.md, "Exit status").
export const EXIT_OK = 0;
/** The command ran and failed part-way, or found damage: partial input, a failed `--exec`, a full queue. */
export const EXIT_FAILED = 1;
/** The command could not start: bad usage, a missing or unreadable path, a locked queue. */
export const EXIT_USAGE = 2;
/** `ferry queue`: the group or schedule the command names does not exist; nothing was changed. */
export const EXIT_NOT_FOUND = 3;

/** A commander argument parser for a whole number of at least `min` (and at most `max`). */
export function integer(min: number, max = Number.MAX_SAFE_INTEGER) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d+$/.test(value) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`expected a whole number${min > 0 ? ` of at least ${min}` : ''}${max < Number.MAX_SAFE_INTEGER ? ` and at most ${max}` : ''}`);
    }
    return n;
  };
}

/** A commander argument parser for milliseconds of at least `min`, up to the longest Node timer (`MAX_TIMER_MS`; a longer one fires after 1 ms). */
export function milliseconds(min: number) {
  return integer(min, MAX_TIMER_MS);
}

/** An error meant for the user: printed as one line, then the process exits with `exitCode`. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT_FAILED,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** Options of {@link openQueue}. */
export interface OpenOptions {
  /** Create the directory when missing (push); otherwise a missing directory is a usage error. */
  create: boolean;
  /** `segmentSize` given on the command line; when absent, an existing queue's own size is used. */
  segmentSize?: number;
  maxSegments?: number;
  maxBytes?: number;
  syncEvery?: number;
  noSync?: boolean;
  /** How long to keep retrying while another process holds the queue, in ms. Default 0: fail at once. */
  lockTimeoutMs?: number;
  /** Stops the lock wait early. */
  signal?: AbortSignal;
}

const LOCK_RETRY_MS = 50;

/**
 * Opens the queue in `dir` for a command. A directory made with another
 * segment size is opened with its own size unless one was asked for.
 *
 * @throws CliError (exit 2) the directory is missing, locked, or cannot be opened.
 */
export async function openQueue(dir: string, o: OpenOptions): Promise<DiskQueue<Uint8Array>> {
  if (!o.create) await requireDirectory(dir);
  const opts: DiskQueueOptions<Uint8Array> = {
    segmentSize: o.segmentSize,
    maxSegments: o.maxSegments,
    maxBytes: o.maxBytes,
    syncEvery: o.syncEvery,
    noSync: o.noSync,
  };
  const deadline = Date.now() + (o.lockTimeoutMs ?? 0);
  for (;;) {
    try {
      return await DiskQueue.open<Uint8Array>(dir, opts);
    } catch (err) {
      if (err instanceof SegmentSizeMismatchError && o.segmentSize === undefined && opts.segmentSize === undefined) {
        opts.segmentSize = err.stored;
        continue;
      }
      if (err instanceof LockedError && Date.now() < deadline && !o.signal?.aborted) {
        await sleep(LOCK_RETRY_MS, o.signal);
        continue;
      }
      throw openFailure(dir, err);
    }
  }
}

/** @throws CliError (exit 2) when `dir` does not exist or is not a directory. */
export async function requireDirectory(dir: string): Promise<void> {
  let st: Stats;
  try {
    st = await stat(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT') throw new CliError(`cannot open ${dir}: ${code ?? err}`, EXIT_USAGE);
    const dangling = danglingLinkError(dir);
    throw new CliError(dangling === undefined ? `no queue at ${dir}: the directory does not exist` : `no queue: ${dangling.message}`, EXIT_USAGE);
  }
  if (!st.isDirectory()) throw new CliError(`no queue at ${dir}: not a directory (${fileKind(st)})`, EXIT_USAGE);
}

function openFailure(dir: string, err: unknown): CliError {
  if (err instanceof LockedError) {
    return new CliError(`${dir} is locked: another process has this queue open`, EXIT_USAGE);
  }
  return new CliError(`cannot open queue ${dir}: ${describe(err)}`, EXIT_USAGE);
}

/** An error's message, with the system error code of its cause when it has one. */
export function describe(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const sys = err as NodeJS.ErrnoException;
  if (sys.code && sys.syscall) {
    // Node's "ENOENT: no such file or directory, open '/x'" → "no such file or directory (ENOENT)"
    const text = err.message.replace(/^[A-Z]+: /, '').replace(/, \w+ '.*'$/, '');
    return `${text} (${sys.code})`;
  }
  const code = (err.cause as NodeJS.ErrnoException | undefined)?.code;
  return code && !err.message.includes(code) ? `${err.message} (${code})` : err.message;
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** `1536` → `1.5 KiB`. */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${n} B` : `${v.toFixed(1)} ${units[u]}`;
}

/** The line push and drain print on stderr when they finish. */
export function summaryLine(verb: string, records: number, bytes: number, startedMs: number): string {
  const seconds = Math.max(1e-6, (performance.now() - startedMs) / 1000);
  const rate = Math.round(records / seconds);
  return `ferry: ${verb} ${records} records (${formatBytes(bytes)}) in ${seconds.toFixed(2)} s, ${rate} records/s`;
}

/** Writes one line to stderr. */
export function note(line: string): void {
  process.stderr.write(`${line}\n`);
}

/**
 * Says on stderr what an open found lost (damage is repaired at open, and a
 * command that does not read would otherwise leave it unmentioned), foreign
 * segments included. Returns how many damaged spans and dropped segments.
 */
export function noteOpenLoss(dir: string, q: DiskQueue<Uint8Array>): number {
  const st = q.stats();
  if (st.corruptions > 0) {
    const segs = st.lostSegments > 0 ? `, ${st.lostSegments} whole segment(s)` : '';
    note(`ferry: opening ${dir} found ${st.corruptions} damaged span(s): ${st.lostRecords} records (${formatBytes(st.lostBytes)}) lost${segs}`);
  }
  return st.corruptions + noteForeignSegments(dir, st);
}

/**
 * Tells on stderr of the segments of a format version this build cannot read
 * that opening a queue dropped (`st` its stats: a newer writer's segments,
 * for which the queue itself raises no event), and returns how many.
 */
export function noteForeignSegments(dir: string, st: DiskQueueStats): number {
  if (st.foreignSegments > 0) {
    note(`ferry: skipped damaged data: opening ${dir} dropped ${st.foreignSegments} segment(s) of an unknown format version (${formatBytes(st.foreignBytes)}; a newer ferry's?)`);
  }
  return st.foreignSegments;
}
