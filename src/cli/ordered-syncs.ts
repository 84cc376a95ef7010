/**
 * The syncs of `ferry forward`'s intake, pipelined and counted in order. A
 * group of lines is appended, then a sync for it starts while the next
 * groups are appended; its lines count as accepted only once its own sync
 * and every older one resolved. A failed sync cuts its group, but a later
 * sync can still land the groups read ahead behind it: counting those would
 * make the count more than a prefix of the input, and a rerun from it would
 * skip the cut lines. So a later sync rejects too once an older one failed.
 */
export class OrderedSyncs {
  readonly #sync: () => Promise<void>;
  readonly #count: (lines: number) => void;
  readonly #ahead: number;
  /** Started and not yet waited for, oldest first; each settles after every older one. */
  readonly #outstanding: Promise<void>[] = [];
  /** The newest group's outcome, counted. */
  #counted: Promise<void> = Promise.resolve();

  /**
   * @param sync makes every line appended so far durable (the spool's `sync`).
   * @param count adds a group's lines to the accepted count, in input order.
   * @param ahead how many syncs may be outstanding before {@link throttle} waits.
   */
  constructor(sync: () => Promise<void>, count: (lines: number) => void, ahead: number) {
    this.#sync = sync;
    this.#count = count;
    this.#ahead = ahead;
  }

  /** Starts a sync for the `lines` appended since the last one (nothing when 0). */
  start(lines: number): void {
    if (lines === 0) return;
    const older = this.#counted;
    const p = this.#sync()
      .then(() => older)
      .then(() => this.#count(lines));
    this.#counted = p;
    // Waited for by throttle, drain or settle; until then its failure is not unhandled.
    p.catch(() => undefined);
    this.#outstanding.push(p);
  }

  /** Waits for the oldest syncs while more than `ahead` are outstanding; rejects with the first failure met. */
  async throttle(): Promise<void> {
    while (this.#outstanding.length > this.#ahead) await this.#outstanding.shift();
  }

  /** Waits for every sync started; rejects with the first failure met. */
  async drain(): Promise<void> {
    while (this.#outstanding.length > 0) await this.#outstanding.shift();
  }

  /** Waits until every sync started has settled, failed or not (the failure path: the count is final then). */
  async settle(): Promise<void> {
    await Promise.allSettled(this.#outstanding.splice(0));
  }
}
