/**
 * The consumer side's turns. A `requeue` is the one consumer call whose
 * effect needs an fdatasync before it is whole (the copy must be durable
 * before the original is committed), so while one waits, the consumer calls
 * made after it (pop, popBatch, commit, requeue) are held here and run in
 * call order once it settles: together they behave like the same calls made
 * one at a time, as the Go spool's mutex gives. Appends and syncs never wait.
 */
export class ConsumerTurns {
  /** Calls waiting, in call order; undefined when nothing holds the turn. */
  private held: Array<() => void> | undefined;
  private drained: Array<() => void> = [];

  /** Whether a requeue holds the turn. */
  get busy(): boolean {
    return this.held !== undefined;
  }

  /** Runs `op` now, or after the requeue holding the turn and the calls held before it. */
  run<T>(op: () => T | Promise<T>): Promise<T> {
    if (!this.held) {
      try {
        return Promise.resolve(op());
      } catch (err) {
        return Promise.reject(err);
      }
    }
    return new Promise<T>((resolve, reject) => {
      this.held!.push(() => {
        try {
          resolve(op());
        } catch (err) {
          reject(err);
        }
      });
    });
  }

  /** A requeue takes the turn (called synchronously inside its own turn). */
  hold(): void {
    this.held ??= [];
  }

  /** The requeue settled: runs the held calls until one of them holds again. */
  release(): void {
    const queue = this.held ?? [];
    this.held = undefined;
    while (queue.length > 0) {
      queue.shift()!();
      if (this.held) {
        (this.held as Array<() => void>).push(...queue);
        return;
      }
    }
    for (const f of this.drained.splice(0)) f();
  }

  /** Resolves once nothing holds the turn. */
  idle(): Promise<void> {
    if (!this.held) return Promise.resolve();
    return new Promise((resolve) => this.drained.push(resolve));
  }
}
