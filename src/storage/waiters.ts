/**
 * Wake-ups for blocked calls, shared by both disk formats: a DiskQueue's
 * take waiting for a record and addWait waiting for space, and the spool's
 * `signal()`.
 *
 * `Waiters` is the one mechanism (the waiting set, abort and close). It
 * counts wake-ups in `generation`, so a caller that checked for work and
 * found none can wait "since generation g" without missing a wake-up that
 * landed in between. `WakeSlot` is the spool's view of it, a one-slot
 * channel: a wake-up nobody waited for is remembered once, for the next wait.
 */
export class Waiters {
  generation = 0;
  private closed = false;
  private pending = new Set<{ resolve(): void; reject(err: unknown): void }>();

  /** How many calls are waiting now. */
  get waiting(): number {
    return this.pending.size;
  }

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

/**
 * A one-slot wake-up, like a buffered Go channel of size one: a wake-up with
 * waiters resolves all of them; one with nobody waiting is remembered (once),
 * so a consumer that found nothing and then waits cannot miss an append that
 * landed in between.
 */
export class WakeSlot {
  private readonly waiters = new Waiters();
  /** The generation the last wait consumed, or that woke the waiters it found. */
  private taken = 0;
  private closedWith: (() => Error) | undefined;

  /** Wakes the waiters, or fills the slot when there are none. */
  fire(): void {
    const woke = this.waiters.waiting > 0;
    this.waiters.wakeAll();
    if (woke) this.taken = this.waiters.generation;
  }

  /** Rejects current and later waits with `err()`. */
  close(err: () => Error): void {
    this.closedWith = err;
    this.waiters.closeAll();
  }

  /** Resolves on the next wake-up (at once when one is remembered); never throws, it rejects. */
  wait(signal?: AbortSignal): Promise<void> {
    const closed = this.closedWith;
    if (closed) return Promise.reject(closed());
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.taken !== this.waiters.generation) {
      this.taken = this.waiters.generation;
      return Promise.resolve();
    }
    return this.waiters.wait(signal, () => this.closedWith!());
  }
}
