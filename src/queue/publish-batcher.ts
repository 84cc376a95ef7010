/**
 * Group commit for publishes: concurrent `publish` calls share one store
 * `append`, so one transaction and one durable commit (an fsync on SQLite, a
 * WAL flush and a round trip on Postgres) serve them all.
 *
 * A publish joins the next flush. A flush starts one turn of the event loop
 * after the first publish waiting for it (`setImmediate`), so every publish
 * issued in the same turn joins: better-sqlite3 commits synchronously, so
 * nothing else could arrive while it runs. While a flush runs (a Postgres
 * round trip), newcomers wait for the one after it. At most one flush runs at
 * a time; one takes whole publishes up to `MAX_FLUSH_MESSAGES` messages (a
 * single larger publish goes alone).
 *
 * A publish resolves only once the append holding its messages has
 * committed, exactly as when it had its own. When a shared append fails,
 * nothing of it was stored (one transaction); each of its publishes is then
 * appended on its own, so a publish the store refuses fails alone and the
 * others are stored. Appends are idempotent by message ID, so this second try
 * never stores a message twice, and one ID published twice in one flush is
 * stored once.
 */

/** Most messages one shared append carries (a larger single publish still goes whole). */
export const MAX_FLUSH_MESSAGES = 1000;

interface Pending<T> {
  msgs: T[];
  resolve(): void;
  reject(err: unknown): void;
}

/** Gathers concurrent appends into shared ones. One per queue. */
export class PublishBatcher<T> {
  readonly #appendShared: (msgs: T[]) => Promise<void>;
  readonly #appendAlone: (msgs: T[]) => Promise<void>;
  #waiting: Array<Pending<T>> = [];
  #scheduled = false;
  #running: Promise<void> | undefined;

  /**
   * @param appendShared stores the messages of several publishes in one transaction, once (no retries: a failure falls back to `appendAlone` per publish).
   * @param appendAlone stores one publish's messages, with whatever retrying the caller does for a single publish.
   */
  constructor(appendShared: (msgs: T[]) => Promise<void>, appendAlone: (msgs: T[]) => Promise<void>) {
    this.#appendShared = appendShared;
    this.#appendAlone = appendAlone;
  }

  /** Resolves once `msgs` are stored (in a shared append or on their own); rejects with the store's error for them. */
  append(msgs: T[]): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#waiting.push({ msgs, resolve, reject });
      this.#schedule();
    });
  }

  /** Resolves when every publish handed to `append` so far has settled. */
  async drain(): Promise<void> {
    while (this.#running !== undefined || this.#waiting.length > 0) {
      if (this.#running === undefined) await new Promise<void>((resolve) => setImmediate(resolve));
      else await this.#running;
    }
  }

  #schedule(): void {
    if (this.#scheduled || this.#running !== undefined || this.#waiting.length === 0) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#running = this.#flush().finally(() => {
        this.#running = undefined;
        this.#schedule();
      });
    });
  }

  #flush(): Promise<void> {
    const batch: Array<Pending<T>> = [];
    let size = 0;
    while (this.#waiting.length > 0) {
      const next = this.#waiting[0]!;
      if (batch.length > 0 && size + next.msgs.length > MAX_FLUSH_MESSAGES) break;
      batch.push(this.#waiting.shift()!);
      size += next.msgs.length;
    }
    return batch.length === 1 ? this.#alone(batch[0]!) : this.#shared(batch);
  }

  async #shared(batch: Array<Pending<T>>): Promise<void> {
    try {
      await this.#appendShared(batch.flatMap((p) => p.msgs));
    } catch {
      // Nothing of the shared append was stored: each publish tries alone.
      await Promise.all(batch.map((p) => this.#alone(p)));
      return;
    }
    for (const p of batch) p.resolve();
  }

  /** Settles `p` with its own append; never rejects. (No async frame: one publish at a time is the common case.) */
  #alone(p: Pending<T>): Promise<void> {
    let appended: Promise<void>;
    try {
      appended = this.#appendAlone(p.msgs);
    } catch (err) {
      appended = Promise.reject(err);
    }
    return appended.then(p.resolve, p.reject);
  }
}
