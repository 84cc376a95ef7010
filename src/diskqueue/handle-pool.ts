/**
 * Bounds open segment descriptors (`maxOpenFiles`). Segments register each
 * use; past the bound the least recently used handle is closed and reopened
 * on its next use. The tail segment is used on every add, so it stays open.
 */

/** What the pool needs of a segment: a way to close its descriptor. */
export interface PooledFile {
  closeHandle(): void;
}

export class HandlePool {
  private open = new Map<PooledFile, true>();

  constructor(private readonly max: number) {}

  /** Records a use of `file`'s handle; closes the least recently used beyond the bound. */
  use(file: PooledFile): void {
    if (this.max <= 0) return;
    this.open.delete(file);
    this.open.set(file, true);
    while (this.open.size > this.max) {
      const oldest = this.open.keys().next().value as PooledFile;
      this.open.delete(oldest);
      oldest.closeHandle();
    }
  }

  /** `file` closed its handle (or was reclaimed). */
  forget(file: PooledFile): void {
    this.open.delete(file);
  }
}
