/**
 * A wake-up list for blocked calls (take waiting for a record, addWait waiting
 * for space). `generation` counts wake-ups, so a caller that checked for work
 * and found none can wait "since generation g" without missing a wake-up that
 * landed in between.
 */
export class Waiters {
  generation = 0;
  private closed = false;
  private pending = new Set<{ resolve(): void; reject(err: unknown): void }>();

  /** Wakes every waiter. */
  wakeAll(): void {
    this.generation++;
    if (this.pending.size === 0) return;
    for (const w of this.pending) w.resolve();
    this.pending.clear();
  }

  /** Wakes every waiter; later waits settle at once. */
  closeAll(): void {
    this.closed = true;
    this.wakeAll();
  }

  /**
   * Resolves on the next wake-up after generation `since` (at once when one
   * already happened); rejects with `onClosed()` once closed, or with the
   * signal's reason when it aborts.
   */
  wait(signal: AbortSignal | undefined, onClosed: () => Error, since = this.generation): Promise<void> {
    if (this.closed) return Promise.reject(onClosed());
    signal?.throwIfAborted();
    if (this.generation !== since) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        this.pending.delete(entry);
        reject(signal!.reason);
      };
      const entry = {
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          if (this.closed) reject(onClosed());
          else resolve();
        },
        reject,
      };
      this.pending.add(entry);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
