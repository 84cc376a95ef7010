/**
 * The spool's `signal()`: a one-slot wake-up, like a buffered Go channel of
 * size one. A wake-up with nobody waiting is remembered (once), so a consumer
 * that found nothing and then waits cannot miss an append that landed in
 * between; a wake-up with waiters resolves all of them.
 */
export class Wakeup {
  private slot = false;
  private closedWith: (() => Error) | undefined;
  private waiters = new Set<{ resolve(): void; reject(err: unknown): void }>();

  /** Wakes the waiters, or fills the slot when there are none. */
  fire(): void {
    if (this.waiters.size === 0) {
      this.slot = true;
      return;
    }
    for (const w of this.waiters) w.resolve();
    this.waiters.clear();
  }

  /** Rejects current and later waits with `err()`. */
  close(err: () => Error): void {
    this.closedWith = err;
    for (const w of this.waiters) w.reject(err());
    this.waiters.clear();
  }

  /** Resolves on the next wake-up (at once when one is remembered). */
  wait(signal?: AbortSignal): Promise<void> {
    if (this.closedWith) return Promise.reject(this.closedWith());
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.slot) {
      this.slot = false;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        this.waiters.delete(entry);
        reject(signal!.reason);
      };
      const entry = {
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        reject: (err: unknown) => {
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      this.waiters.add(entry);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
