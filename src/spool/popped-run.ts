import { InvalidArgumentError } from '../errors.js';
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
