/** Options of `Spool.open`, each with its default (the Go spool's `Options`). */
import { InvalidArgumentError } from '../errors.js';
import { knownKeys, rejectUnknownKeys } from '../known-keys.js';
import { shown } from '../show-value.js';
import type { FileSystem } from '../storage/fs.js';

/** Segment size used when `segmentBytes` is not given: 8 MiB. */
export const DEFAULT_SEGMENT_BYTES = 8 << 20;
/** Backlog cap used when `maxBytes` is 0 or not given: 64 MiB. A placeholder, not a sizing advice. */
export const DEFAULT_MAX_BYTES = 64 << 20;
/** `maxBytes: UNBOUNDED` turns the cap off; it has to be asked for. */
export const UNBOUNDED = -1;

export interface SpoolOptions {
  /**
   * A segment file rotates once it holds at least one frame and the next one
   * would take it past this many bytes (a single larger record still gets
   * written, alone). 0 or absent: 8 MiB.
   */
  segmentBytes?: number;
  /**
   * Cap on the undelivered backlog in bytes (frames plus segment headers,
   * minus what the head has consumed). Past it appends reject with
   * `FullError` and nothing changes. 0 or absent: 64 MiB; `UNBOUNDED`: no cap.
   */
  maxBytes?: number;
  /** fdatasync the cursor on every commit. Default false: the cursor is a progress hint. */
  commitSync?: boolean;
  /** The file-system seam; tests pass a fault-injecting one. Default: the real file system. */
  fs?: FileSystem;
}

const SPOOL_OPTION_KEYS = knownKeys<SpoolOptions>({ segmentBytes: true, maxBytes: true, commitSync: true, fs: true });

export interface ResolvedSpoolOptions {
  segmentBytes: number;
  /** The cap in bytes; `Infinity` when unbounded. */
  maxBytes: number;
  commitSync: boolean;
  fs: FileSystem;
}

/**
 * Applies the defaults and checks every option.
 *
 * @throws InvalidArgumentError an option of the wrong type or out of range, or a key that is not an option (a misspelling).
 */
export function resolveSpoolOptions(o: SpoolOptions, fs: FileSystem): ResolvedSpoolOptions {
  if (typeof o !== 'object' || o === null) throw new InvalidArgumentError(`options must be an object, got ${shown(o)}`);
  rejectUnknownKeys('Spool option', o, SPOOL_OPTION_KEYS);
  const seg = o.segmentBytes ?? 0;
  if (!Number.isSafeInteger(seg) || seg < 0) {
    throw new InvalidArgumentError(`segmentBytes must be a non-negative integer, got ${shown(o.segmentBytes)}`);
  }
  const max = o.maxBytes ?? 0;
  if (!Number.isSafeInteger(max) || max < UNBOUNDED) {
    throw new InvalidArgumentError(`maxBytes must be a non-negative integer or UNBOUNDED, got ${shown(o.maxBytes)}`);
  }
  if (o.commitSync !== undefined && typeof o.commitSync !== 'boolean') {
    throw new InvalidArgumentError(`commitSync must be a boolean, got ${shown(o.commitSync)}`);
  }
  return {
    segmentBytes: seg || DEFAULT_SEGMENT_BYTES,
    maxBytes: max === UNBOUNDED ? Infinity : max || DEFAULT_MAX_BYTES,
    commitSync: o.commitSync ?? false,
    fs: o.fs ?? fs,
  };
}
