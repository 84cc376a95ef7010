/**
 * Options of `DiskQueue.open`, each with its default (the Go diskqueue, "Sizing and
 * limits" and "Durability").
 */
import { InvalidArgumentError } from '../errors.js';
import { DEFAULT_DIR_MODE, DEFAULT_FILE_MODE, type FileSystem } from '../storage/fs.js';
import type { Codec } from './codecs.js';
import { DEFAULT_SEGMENT_SIZE, normalizeSegmentSize } from './format.js';
import { shown } from '../show-value.js';

export interface DiskQueueOptions<T> {
  /** Turns values into payload bytes and back. Default: raw bytes (`codecs.bytes`). */
  codec?: Codec<T>;
  /**
   * Data capacity of each segment file in bytes. Default 8 MiB; floored at
   * 4 KiB, rounded up to a multiple of 4096, capped at 2^48−4096. Reopening a
   * directory with another size rejects with `SegmentSizeMismatchError`.
   */
  segmentSize?: number;
  /** Most segment files at once; past it `add` rejects with `FullError`. Default 32; 0 = unbounded; otherwise at least 2. */
  maxSegments?: number;
  /** Cap on the backlog's framed bytes; past it `add` rejects with `FullError`. Default: none (0). */
  maxBytes?: number;
  /**
   * 0 or 1 (default): every add and commit is durable before it resolves (two
   * fdatasyncs, shared by concurrent callers: group commit). N > 1: flush once
   * every N operations; up to N operations are exposed to a power cut.
   */
  syncEvery?: number;
  /** With `syncEvery` > 1 or `noSync`: also flush on this timer (ms) while anything is unsynced. Default 0 = off. */
  syncIntervalMs?: number;
  /** Never flush except on `sync()` and `close()`. A killed process loses nothing; a power cut may. */
  noSync?: boolean;
  /**
   * Most segment descriptors open at once, from the open on: the open reads
   * one header at a time, flushes at most this many segments at once, and
   * least recently used descriptors are closed and reopened on demand. Set it
   * when `maxSegments` is 0 (unbounded) and the backlog may outgrow the
   * process's descriptor limit. Default 0 = no limit.
   */
  maxOpenFiles?: number;
  /** Prefix each payload with its enqueue time (8 bytes, BE Unix ns); readers report the wait as `lastAgeMs`. Default false. */
  stampRecords?: boolean;
  /**
   * Permission bits for the segment files this queue creates. Default `0o600`:
   * only the owner can read queued records. The process umask still applies,
   * so the result is never looser than the umask allows; pass `0o640` (with a
   * `dirMode` of `0o750`) to let the owner's group read the queue. Existing
   * files keep the mode they have.
   */
  fileMode?: number;
  /**
   * Permission bits for the queue directory (and any missing parents) when the
   * open creates it. Default `0o700`; the umask applies as for `fileMode`. An
   * existing directory keeps its mode.
   */
  dirMode?: number;
  /** The file-system seam; tests pass a fault-injecting one. Default: the real file system. */
  fs?: FileSystem;
}

/** Options with every default applied. */
export interface ResolvedOptions<T> {
  codec: Codec<T>;
  segmentSize: number;
  maxSegments: number;
  maxBytes: number;
  syncEvery: number;
  syncIntervalMs: number;
  noSync: boolean;
  maxOpenFiles: number;
  stampRecords: boolean;
  fileMode: number;
  dirMode: number;
  fs: FileSystem;
  /** True when every add and commit pays its own (shared) fsyncs. */
  perOp: boolean;
}

export const DEFAULT_MAX_SEGMENTS = 32;

function count(name: string, v: number | undefined, dflt: number): number {
  if (v === undefined) return dflt;
  if (!Number.isSafeInteger(v) || v < 0) throw new InvalidArgumentError(`${name} must be a non-negative integer, got ${shown(v)}`);
  return v;
}

function permBits(name: string, v: number | undefined, dflt: number): number {
  if (v === undefined) return dflt;
  if (!Number.isInteger(v) || v < 0 || v > 0o777) throw new InvalidArgumentError(`${name} must be permission bits between 0 and 0o777, got ${shown(v)}`);
  return v;
}

function flag(name: string, v: boolean | undefined): boolean {
  if (v === undefined) return false;
  if (typeof v !== 'boolean') throw new InvalidArgumentError(`${name} must be a boolean, got ${shown(v)}`);
  return v;
}

/** Every key `DiskQueue.open` understands: a misspelled option is an error, not a silent default. */
const OPTION_KEYS = new Set([
  'codec',
  'segmentSize',
  'maxSegments',
  'maxBytes',
  'syncEvery',
  'syncIntervalMs',
  'noSync',
  'maxOpenFiles',
  'stampRecords',
  'fileMode',
  'dirMode',
  'fs',
]);

/**
 * `maxSegments` is 0 (unbounded) or at least 2: a full segment is reclaimed
 * only once a newer one exists, so with room for one alone a full, wholly
 * consumed segment would keep the queue full for good.
 */
function segmentCap(v: number | undefined): number {
  const n = count('maxSegments', v, DEFAULT_MAX_SEGMENTS);
  if (n === 1) throw new InvalidArgumentError('maxSegments must be 0 (unbounded) or at least 2');
  return n;
}

/**
 * Applies the defaults and checks every option.
 *
 * @throws InvalidArgumentError an option of the wrong type or out of range.
 */
export function resolveOptions<T>(o: DiskQueueOptions<T>, codec: Codec<T>, fs: FileSystem): ResolvedOptions<T> {
  if (typeof o !== 'object' || o === null) throw new InvalidArgumentError('options must be an object');
  for (const key of Object.keys(o)) {
    if (!OPTION_KEYS.has(key)) throw new InvalidArgumentError(`unknown DiskQueue option ${JSON.stringify(key)} (known: ${[...OPTION_KEYS].join(', ')})`);
  }
  if (o.codec !== undefined && (typeof o.codec?.encode !== 'function' || typeof o.codec?.decode !== 'function')) {
    throw new InvalidArgumentError('codec must have encode and decode functions');
  }
  if (o.fs !== undefined && ['open', 'readdir', 'mkdirp', 'unlink', 'rename', 'syncDir', 'lock'].some((m) => typeof (o.fs as unknown as Record<string, unknown>)?.[m] !== 'function')) {
    throw new InvalidArgumentError('fs must implement the file-system seam (open, readdir, mkdirp, unlink, rename, syncDir, lock)');
  }
  const syncEvery = count('syncEvery', o.syncEvery, 0);
  const noSync = flag('noSync', o.noSync);
  const syncIntervalMs = count('syncIntervalMs', o.syncIntervalMs, 0);
  // Two answers to one question (when to flush), or a timer for a policy that has nothing to flush: refused, not one silently winning.
  if (noSync && syncEvery > 1) throw new InvalidArgumentError('give at most one of noSync and syncEvery > 1');
  if (syncIntervalMs > 0 && !noSync && syncEvery <= 1) throw new InvalidArgumentError('syncIntervalMs applies only with syncEvery > 1 or noSync: every operation is already durable');
  return {
    codec: o.codec ?? codec,
    segmentSize: normalizeSegmentSize(count('segmentSize', o.segmentSize, DEFAULT_SEGMENT_SIZE)),
    maxSegments: segmentCap(o.maxSegments),
    maxBytes: count('maxBytes', o.maxBytes, 0),
    syncEvery,
    syncIntervalMs,
    noSync,
    maxOpenFiles: count('maxOpenFiles', o.maxOpenFiles, 0),
    stampRecords: flag('stampRecords', o.stampRecords),
    fileMode: permBits('fileMode', o.fileMode, DEFAULT_FILE_MODE),
    dirMode: permBits('dirMode', o.dirMode, DEFAULT_DIR_MODE),
    fs: o.fs ?? fs,
    perOp: !noSync && syncEvery <= 1,
  };
}

/**
 * Checks the options object a blocking or iterating call takes.
 *
 * @throws InvalidArgumentError it is not an object.
 */
export function checkCallOptions(opts: unknown): void {
  if (typeof opts !== 'object' || opts === null) throw new InvalidArgumentError(`options must be an object, got ${shown(opts)}`);
}

/**
 * Checks that `values` can be iterated.
 *
 * @throws InvalidArgumentError it cannot.
 */
export function checkIterable(name: string, values: unknown): void {
  if (values === null || typeof values !== 'object' || typeof (values as Iterable<unknown>)[Symbol.iterator] !== 'function') {
    throw new InvalidArgumentError(`${name} must be iterable, got ${shown(values)}`);
  }
}
