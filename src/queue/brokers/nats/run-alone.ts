/**
 * The gate a subscription's handlers pass before they run: any number run
 * side by side, but a recovered delivery (one whose holder may have crashed
 * because of it, attempt-ledger.ts) runs alone, so a crash it causes again
 * interrupts no other handler. First come, first served: once a delivery
 * waits to run alone, later ones wait behind it, so it is not starved.
 */
interface Waiter {
  readonly alone: boolean;
  readonly go: (admitted: boolean) => void;
}

export class RunAlone {
  #side = 0;
  #alone = false;
  readonly #queue: Waiter[] = [];

  /** Handlers running now (alone or not). */
  get running(): number {
    return this.#side + (this.#alone ? 1 : 0);
  }

  /**
   * Waits for the turn to run, alone or beside others. Resolves with the
   * function that ends the turn, or undefined when `signal` aborted first.
   */
  async enter(alone: boolean, signal?: AbortSignal): Promise<(() => void) | undefined> {
    if (signal?.aborted) return undefined;
    if (this.#queue.length === 0 && this.#fits(alone)) {
      this.#admit(alone);
      return this.#leave(alone);
    }
    const admitted = await new Promise<boolean>((resolve) => {
      const w: Waiter = { alone, go: resolve };
      this.#queue.push(w);
      signal?.addEventListener('abort', () => {
        const i = this.#queue.indexOf(w);
        if (i === -1) return; // already admitted
        this.#queue.splice(i, 1);
        resolve(false);
        this.#drain(); // a waiter behind it may fit now
      }, { once: true });
    });
    return admitted ? this.#leave(alone) : undefined;
  }

  #fits(alone: boolean): boolean {
    return !this.#alone && (!alone || this.#side === 0);
  }

  #admit(alone: boolean): void {
    if (alone) this.#alone = true;
    else this.#side++;
  }

  #leave(alone: boolean): () => void {
    let left = false;
    return () => {
      if (left) return;
      left = true;
      if (alone) this.#alone = false;
      else this.#side--;
      this.#drain();
    };
  }

  #drain(): void {
    while (this.#queue.length > 0 && this.#fits(this.#queue[0]!.alone)) {
      const w = this.#queue.shift()!;
      this.#admit(w.alone);
      w.go(true);
    }
  }
}
