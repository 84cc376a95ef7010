/**
 * The ack ledger: every record the shared read cursor has passed but the
 * commit cursor has not, in log order.
 *
 * A record enters when it is read (reserved, taken, skipped, or stepped past
 * as damage) and is marked done by `ack`, `commit`, or at once for reads that
 * retire themselves. The commit cursor only moves across the done prefix, so a
 * record acknowledged out of order waits, never lost, behind an older
 * reservation that is still out; a crash replays from the commit cursor.
 *
 * Offsets handed to callers are `(segment << 48) | position` as a bigint: the
 * position of the record's first byte in its segment file. They survive
 * reopen and order like the log.
 */
import type { Segment } from './segment.js';

/** A record (or a run of damaged bytes) between the commit and read cursors. */
export interface LedgerEntry {
  seg: Segment;
  start: number;
  end: number;
  /** Records it stands for: 1, or how many a damaged span cost. */
  records: number;
  done: boolean;
  /**
   * The offset handed out when it was entered as a reservation (an ack or a
   * lookup may name it); undefined for a read that retired itself, or damage.
   */
  offset: bigint | undefined;
}

const SHIFT = 48n;
const POS_MASK = (1n << SHIFT) - 1n;

/** Packs a segment number and file position into an offset. */
export function packOffset(seq: number, pos: number): bigint {
  return (BigInt(seq) << SHIFT) | BigInt(pos);
}

/** Splits an offset into its segment number and file position. */
export function unpackOffset(offset: bigint): { seq: number; pos: number } {
  return { seq: Number(offset >> SHIFT), pos: Number(offset & POS_MASK) };
}

export class AckLedger {
  private entries: LedgerEntry[] = [];
  private head = 0;
  /**
   * Where the last lookup found its entry in `entries`, plus one: acks mostly
   * come in the order of their reservations, so the next is usually there.
   */
  private hint = 0;
  /** Framed bytes of entries not yet done. */
  inFlightBytes = 0;
  /** Done entries behind the read cursor's rewound position, in log order; see {@link rewind}. */
  private passed: LedgerEntry[] = [];
  private passedHead = 0;

  get size(): number {
    return this.entries.length - this.head;
  }

  add(e: LedgerEntry): void {
    this.entries.push(e);
    if (!e.done) this.inFlightBytes += e.end - e.start;
  }

  /**
   * Marks the reserved record starting at `offset` done (again, harmlessly).
   * Returns false when no reservation in the ledger starts there.
   */
  ack(offset: bigint): boolean {
    const e = this.lookup(offset);
    if (!e) return false;
    this.ackEntry(e);
    return true;
  }

  /** The entry of the record reserved at `offset` (done or not), if the ledger holds it. */
  lookup(offset: bigint): LedgerEntry | undefined {
    // Both lists are in log order: no map of reservations to keep up per
    // record, a look at the hinted slot (a reservation's own offset, compared
    // without unpacking), else a binary search.
    const h = this.hint;
    if (h >= this.head && h < this.entries.length && this.entries[h]!.offset === offset) {
      this.hint = h + 1;
      return this.entries[h];
    }
    const seq = Number(offset >> SHIFT);
    const pos = Number(offset & POS_MASK);
    let i = search(this.entries, this.head, seq, pos);
    if (i >= 0) {
      this.hint = i + 1;
      return this.entries[i]!.offset !== undefined ? this.entries[i] : undefined;
    }
    if (this.passed.length === 0) return undefined;
    i = search(this.passed, this.passedHead, seq, pos);
    return i >= 0 && this.passed[i]!.offset !== undefined ? this.passed[i] : undefined;
  }

  /** Marks an entry from {@link lookup} done (once). */
  ackEntry(e: LedgerEntry): void {
    if (!e.done) this.finish(e);
  }

  /** Whether a record reserved at `offset` is in the ledger (done or not). */
  holds(offset: bigint): boolean {
    return this.lookup(offset) !== undefined;
  }

  /** Marks every record starting at or before `offset` done; returns how many it marked. */
  ackThrough(offset: bigint): number {
    const { seq, pos } = unpackOffset(offset);
    let n = 0;
    for (let i = this.head; i < this.entries.length; i++) {
      const e = this.entries[i]!;
      if (e.seg.seq > seq || (e.seg.seq === seq && e.start > pos)) break;
      if (!e.done) {
        this.finish(e);
        n++;
      }
    }
    return n;
  }

  /**
   * Removes the done prefix, handing each entry to `visit`, oldest first (no
   * array of them: an ack of a batch of 256 reservations retires 256 entries).
   */
  takeDone(visit: (e: LedgerEntry) => void): void {
    while (this.head < this.entries.length && this.entries[this.head]!.done) visit(this.entries[this.head++]!);
    if (this.head > 1024 && this.head * 2 > this.entries.length) {
      this.entries = this.entries.slice(this.head);
      this.hint -= this.head;
      this.head = 0;
    }
  }

  /**
   * For rewind: drops every outstanding reservation, so its record is read
   * again, and keeps every entry already done (taken, acked, skipped, a
   * requeued original, damage), so re-reading passes it instead of handing it
   * out a second time. Returns the oldest dropped reservation (where reading
   * resumes) and all of them; undefined when nothing was outstanding.
   */
  rewind(): { first: LedgerEntry; dropped: LedgerEntry[] } | undefined {
    let i = this.head;
    while (i < this.entries.length && this.entries[i]!.done) i++;
    const first = this.entries[i];
    if (!first) return undefined;
    const dropped: LedgerEntry[] = [];
    const kept: LedgerEntry[] = [];
    for (let j = i; j < this.entries.length; j++) {
      const e = this.entries[j]!;
      if (e.done) {
        kept.push(e);
        continue;
      }
      dropped.push(e);
      this.inFlightBytes -= e.end - e.start;
    }
    this.entries.length = i;
    // Entries still waiting from an earlier rewind lie after everything read since.
    this.passed = kept.concat(this.passed.slice(this.passedHead));
    this.passedHead = 0;
    return { first, dropped };
  }

  /** Whether a rewind left done entries ahead of the read cursor (rare: only then does a read need to look for them). */
  get passing(): boolean {
    return this.passed.length > 0;
  }

  /**
   * The done entry a rewind left at `seg`/`pos`, if the read cursor has
   * reached it again; it goes back into the ledger in log order, and the
   * cursor steps over it.
   */
  passAt(seg: Segment, pos: number): LedgerEntry | undefined {
    const e = this.passed[this.passedHead];
    if (!e || e.seg !== seg || e.start !== pos) return undefined;
    if (++this.passedHead === this.passed.length) {
      this.passed = [];
      this.passedHead = 0;
    }
    this.entries.push(e);
    return e;
  }

  private finish(e: LedgerEntry): void {
    e.done = true;
    this.inFlightBytes -= e.end - e.start;
  }
}

/** The index of the entry at segment `seq`, position `pos` in `list` (in log order) from `from` on, or -1. */
function search(list: readonly LedgerEntry[], from: number, seq: number, pos: number): number {
  let lo = from;
  let hi = list.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const e = list[mid]!;
    const s = e.seg.seq;
    if (s === seq && e.start === pos) return mid;
    if (s < seq || (s === seq && e.start < pos)) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}
