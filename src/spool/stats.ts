/**
 * The plain object `Spool.stats()` returns: the Go spool's `Stats` in
 * camelCase. Gauges describe the spool now; counters count since open and are
 * not persisted. Bytes are bytes.
 */
export interface SpoolStats {
  /** Undelivered bytes, what `maxBytes` caps (same as `spool.bytes`). */
  backlogBytes: number;
  /** The cap; 0 when unbounded. */
  maxBytes: number;
  /** Sum of the segment files' sizes: what fills the volume. */
  diskBytes: number;
  /** Segment files on disk. */
  segments: number;
  /** Bytes written and not yet fdatasynced: what a power cut would cost now. */
  unsyncedBytes: number;
  /** Records accepted by `append`, `appendNoSync` and `requeue`. */
  appended: number;
  /** Records handed out by `pop`, redeliveries included. */
  popped: number;
  /** Records retired by a commit. */
  committed: number;
  /** Appends refused with `FullError` or `ExceedsCapError`. */
  full: number;
  /** Bytes destroyed by damage found while reading or at open; a lower bound. */
  lostBytes: number;
  /** Segments skipped or dropped whole because of damage. */
  lostSegments: number;
  /** Segments dropped at open for a format version this build cannot read. */
  foreignSegments: number;
  foreignBytes: number;
  /** Failed cursor writes or syncs (see `spool.cursorError`). */
  cursorErrors: number;
  /** Bytes a torn or damaged tail cost when it was cut (same as `spool.discarded`). */
  discardedBytes: number;
}
