/**
 * Segment file naming. Both formats name a segment by its number in decimal,
 * zero-padded to a minimum width, between a fixed prefix and suffix; only the
 * canonical spelling is a segment, so one number never names two files.
 *
 * - diskqueue: `data.` + at least 8 digits (`data.00000001`), numbered from 1;
 * - spool: at least 20 digits + `.seg` (`00000000000000000001.seg`).
 */

/** Names and parses the segment files of one format. */
export interface SegmentNaming {
  fileName(seq: number): string;
  /** The segment number of a file name, or undefined when it is not a canonical segment name. */
  parse(name: string): number | undefined;
  /** Segment numbers present in a directory listing, ascending. */
  list(names: string[]): number[];
}

/** A naming scheme `prefix` + number padded to `width` digits + `suffix`. */
export function segmentNaming(prefix: string, width: number, suffix: string): SegmentNaming {
  const fileName = (seq: number) => `${prefix}${String(seq).padStart(width, '0')}${suffix}`;
  const parse = (name: string): number | undefined => {
    if (!name.startsWith(prefix) || !name.endsWith(suffix)) return undefined;
    const digits = name.slice(prefix.length, name.length - suffix.length);
    if (digits.length < width || !/^\d+$/.test(digits)) return undefined;
    const seq = Number(digits);
    return Number.isSafeInteger(seq) && seq > 0 && fileName(seq) === name ? seq : undefined;
  };
  const list = (names: string[]): number[] => {
    const out: number[] = [];
    for (const n of names) {
      const seq = parse(n);
      if (seq !== undefined) out.push(seq);
    }
    return out.sort((a, b) => a - b);
  };
  return { fileName, parse, list };
}

const diskqueue = segmentNaming('data.', 8, '');

/** `data.00000001` for 1. */
export function segmentFileName(seq: number): string {
  return diskqueue.fileName(seq);
}

/**
 * The segment number of a file name, or undefined when it is not a segment.
 * Only the canonical spelling counts (`data.00000001`, not `data.000000001`).
 */
export function parseSegmentFileName(name: string): number | undefined {
  return diskqueue.parse(name);
}

/** Segment numbers present in a directory listing, ascending. */
export function listSegments(names: string[]): number[] {
  return diskqueue.list(names);
}

/** The spool's naming: `00000000000000000001.seg` for 1 (20 digits hold any u64). */
export const spoolSegmentNames = segmentNaming('', 20, '.seg');
