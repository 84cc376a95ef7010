/**
 * The plain object `DiskQueue.stats()` returns (the Go diskqueue, "Observability").
 * Byte figures are bytes; counters are since open unless noted.
 */
export interface DiskQueueStats {
  /** Published records not yet committed (unread plus in flight); an add waiting for its group commit is not counted yet. */
  backlog: number;
  /**
   * Framed bytes written and not yet committed: the backlog's bytes plus
   * those of adds still waiting for their group commit, since they already
   * hold their place under `maxBytes` (as `added` already counts them).
   */
  backlogBytes: number;
  /** The `maxBytes` cap, 0 when there is none. */
  maxBytes: number;
  /** The `maxSegments` cap, 0 when there is none. */
  maxSegments: number;
  /** Framed bytes reserved but not yet acknowledged. */
  inFlightBytes: number;
  /** Bytes a power cut would cost now (always 0 under the per-op policy). */
  unsyncedBytes: number;
  /** Segment files in the directory. */
  segments: number;
  /** Bytes those files occupy (headers plus preallocated data regions). */
  diskBytes: number;
  /** Records added since open. */
  added: number;
  /** Records handed to readers since open. */
  delivered: number;
  /** Records retired by commit or ack since open. */
  committed: number;
  /** Loss events: each was or will be reported by exactly one `CorruptError`. */
  corruptions: number;
  lostBytes: number;
  lostRecords: number;
  /** Whole segment files dropped as unreadable. */
  lostSegments: number;
  /** Fully committed segments whose unlink failed; climbing means disk is not being freed. */
  unreclaimed: number;
  /** Segments of an unknown format version, dropped at open. */
  foreignSegments: number;
  /** Bytes of those foreign segments. */
  foreignBytes: number;
  /**
   * Bytes found at open past the last record a segment's header published: a
   * torn tail of adds that never resolved (a power cut or a kill between the
   * record write and its header), or of a segment whose creation never
   * reached the disk. They are discarded, not lost: no add that resolved is
   * among them, so they count in neither `lostBytes` nor `corruptions`.
   */
  discardedBytes: number;
  /** Adds refused with `FullError` since open. */
  rejectedFull: number;
}
