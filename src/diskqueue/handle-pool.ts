/**
 * Bounds open segment descriptors (`maxOpenFiles`). Segments register each
 * use; past the bound the least recently used handle is closed and reopened
 * on its next use. The tail segment is used on every add, so it stays open.
 */
import type { Segment } from './segment.js';

export class HandlePool {
  private open = new Map<Segment, true>();

  constructor(private readonly max: number) {}

  /** Records a use of `seg`'s handle; closes the least recently used beyond the bound. */
  use(seg: Segment): void {
    if (this.max <= 0) return;
    this.open.delete(seg);
    this.open.set(seg, true);
    while (this.open.size > this.max) {
      const oldest = this.open.keys().next().value as Segment;
      this.open.delete(oldest);
      oldest.closeHandle();
    }
  }

  /** `seg` closed its handle (or was reclaimed). */
  forget(seg: Segment): void {
    this.open.delete(seg);
  }
}
