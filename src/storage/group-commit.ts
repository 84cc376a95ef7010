/**
 * Group commit: callers that need a flush join the next one, so concurrent
 * producers share fsyncs instead of queueing for one each. A flush that is
 * running covers only what was written before it started; callers arriving
 * while it runs are served by the one after it.
 *
 * Shared by both disk formats: the DiskQueue's flusher, the spool's flusher
 * and the spool's cursor file each run their fdatasyncs through one.
 */
export class GroupCommit {
  private running = false;
  private waiting: Array<{ resolve(): void; reject(err: unknown): void }> = [];
  private idle: Array<() => void> = [];

  constructor(private readonly flush: () => Promise<void>) {}

  /** Resolves once a flush that started after this call has completed. */
  request(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      // Start on a microtask so every write issued in the same turn joins.
      if (!this.running && this.waiting.length === 1) queueMicrotask(() => this.start());
    });
  }

  /** Rejects every caller waiting for the next flush: their writes were rolled back. */
  failWaiting(err: unknown): void {
    const batch = this.waiting;
    this.waiting = [];
    for (const w of batch) w.reject(err);
  }

  /** Resolves when no flush is running. */
  settled(): Promise<void> {
    if (!this.running) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  private start(): void {
    if (this.running || this.waiting.length === 0) return;
    this.running = true;
    const batch = this.waiting;
    this.waiting = [];
    this.flush().then(
      () => batch.forEach((w) => w.resolve()),
      (err) => batch.forEach((w) => w.reject(err)),
    ).finally(() => {
      this.running = false;
      if (this.waiting.length) this.start();
      else this.idle.splice(0).forEach((f) => f());
    });
  }
}
