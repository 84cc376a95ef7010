/**
 * Segment file naming for the diskqueue format: `data.` followed by the
 * segment number as at least 8 zero-padded decimal digits, numbered from 1,
 * never reused.
 */
const PATTERN = /^data\.(\d{8,})$/;

/** `data.00000001` for 1. */
export function segmentFileName(seq: number): string {
  return `data.${String(seq).padStart(8, '0')}`;
}

/**
 * The segment number of a file name, or undefined when it is not a segment.
 * Only the canonical spelling counts (`data.00000001`, not `data.000000001`),
 * so one number never names two files.
 */
export function parseSegmentFileName(name: string): number | undefined {
  const m = PATTERN.exec(name);
  if (!m) return undefined;
  const seq = Number(m[1]);
  return Number.isSafeInteger(seq) && seq > 0 && segmentFileName(seq) === name ? seq : undefined;
}

/** Segment numbers present in a directory listing, ascending. */
export function listSegments(names: string[]): number[] {
  const out: number[] = [];
  for (const n of names) {
    const seq = parseSegmentFileName(n);
    if (seq !== undefined) out.push(seq);
  }
  return out.sort((a, b) => a - b);
}
