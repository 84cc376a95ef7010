/**
 * How much a segment held when nothing of it is left to count: the file is
 * gone, or nothing in it vouches for itself. The open books such a loss and
 * `verifyQueue` predicts it; both take the estimate from here so the two
 * always agree.
 */
import { HEADER_SIZE } from './format.js';

/** Records and bytes a lost segment is estimated to have held. */
export interface LossEstimate {
  records: number;
  bytes: number;
}

/** What an estimate is read from: a surviving segment, as the open keeps it. */
export interface SegmentShape {
  oversized: boolean;
  writtenCount: number;
  writeCursor: number;
}

/**
 * A sealed segment was full and records tend to be alike, so the nearest
 * surviving segment before the loss is the best guide; failing that, the one
 * after it; failing both, one record in a segment's worth of bytes. A segment
 * is only ever created for a record, so it held at least one. Oversized
 * segments (one record larger than the geometry) say nothing about the rest.
 *
 * @param before surviving segments before the loss, nearest first; read lazily
 *   and only until one fits, so a caller can compute each shape on demand.
 * @param after the segment right after the loss, when its header is sound.
 */
export function estimateLostSegment(before: Iterable<SegmentShape>, after: SegmentShape | undefined, segmentSize: number): LossEstimate {
  for (const s of before) {
    if (!s.oversized && s.writtenCount > 0) return { records: s.writtenCount, bytes: s.writeCursor - HEADER_SIZE };
  }
  if (after && !after.oversized && after.writtenCount > 0) return { records: after.writtenCount, bytes: after.writeCursor - HEADER_SIZE };
  return { records: 1, bytes: segmentSize };
}
