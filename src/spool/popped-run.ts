import { InvalidArgumentError } from '../errors.js';
import { shown } from '../show-value.js';
import type { Popped } from './popped.js';

/**
 * The records of one segment in a {@link PoppedRun}, for its commit: the
 * segment (by identity), its rollback epoch at the pop, and each record's
 * file position; the last record ends at `end`.
 */
export interface RunPiece {
  readonly segment: object;
  readonly epoch: number;
  readonly ats: number[];
  readonly end: number;
}

/**
 * Records laid out in one buffer: record `k` is `bytes[starts[k], starts[k]
 * + lengths[k])`, in order; other bytes of `bytes` are not records. What
 * `Spool.appendRunNoSync` takes (lines and their newlines, say), and what a
 * {@link PoppedRun} is.
 */
export interface RecordRun {
  readonly bytes: Uint8Array;
  readonly starts: readonly number[];
  readonly lengths: readonly number[];
}

/**
 * Records popped together by `Spool.popRun`: their bytes in one copy the
 * caller owns, and one commit for all of them (`Spool.commitRuns`). Record
 * `k` is `bytes[starts[k], starts[k] + lengths[k])`; other bytes of `bytes`
 * (the frame headers between records) are unspecified. The cheap form of a
 * `popBatch` for a sender that hands records on in bulk: no object and no
 * view per record.
 */
export class PoppedRun implements RecordRun {
  /** @internal Made by `Spool.popRun`. */
  constructor(
    /** The records' bytes, back to back in spool order, with unspecified bytes between them. */
    readonly bytes: Uint8Array,
    /** Where each record starts in {@link bytes}. */
    readonly starts: readonly number[],
    /** Each record's length in bytes. */
    readonly lengths: readonly number[],
    /** @internal The last record, which a later pop can start after. */
    readonly last: Popped,
    /** @internal The records by segment, oldest first, for the commit. */
    readonly pieces: readonly RunPiece[],
  ) {}

  /** How many records the run holds (at least one). */
  get count(): number {
    return this.starts.length;
  }

  /**
   * Record `k`'s bytes: a view into {@link bytes}.
   *
   * @throws InvalidArgumentError `k` is not an integer from 0 to `count − 1`.
   */
  record(k: number): Uint8Array {
    if (!Number.isInteger(k) || k < 0 || k >= this.starts.length) throw new InvalidArgumentError(`record ${String(k)} is not in this run of ${this.starts.length}`);
    const s = this.starts[k]!;
    return this.bytes.subarray(s, s + this.lengths[k]!);
  }
}

/**
 * The end of the range `from`…`to` of `run` after checking both: `run` has a
 * `Uint8Array` of bytes and as many starts as lengths, each record of the
 * range lies inside the bytes, and the range is one of its records'.
 *
 * @throws InvalidArgumentError with `placed` 0, naming what is wrong.
 * @internal
 */
export function checkRun(run: RecordRun, from: number, to: number | undefined): number {
  const bad = (what: string) => Object.assign(new InvalidArgumentError(`appendRunNoSync: ${what}`), { placed: 0 });
  if (typeof run !== 'object' || run === null || !(run.bytes instanceof Uint8Array) || !Array.isArray(run.starts) || !Array.isArray(run.lengths)) {
    throw bad('a run is { bytes: Uint8Array, starts: number[], lengths: number[] }');
  }
  const count = run.starts.length;
  if (run.lengths.length !== count) throw bad(`${count} starts but ${run.lengths.length} lengths`);
  const end = to ?? count;
  if (!Number.isInteger(from) || !Number.isInteger(end) || from < 0 || end < from || end > count) throw bad(`records ${shown(from)} to ${shown(to)} are not a range of the run's ${count}`);
  const size = run.bytes.length;
  for (let k = from; k < end; k++) {
    const s = run.starts[k];
    const n = run.lengths[k];
    if (!Number.isInteger(s) || !Number.isInteger(n) || s! < 0 || n! < 0 || s! + n! > size) throw bad(`record ${k} (start ${shown(s)}, length ${shown(n)}) is not inside its ${size} bytes`);
  }
  return end;
}
