/**
 * Group commit for publishes: concurrent `publish` calls share one store
 * `append`, so one transaction and one durable commit (an fsync on SQLite, a
 * WAL flush and a round trip on Postgres) serve them all.
 *
 * A publish joins the next flush. A flush starts one turn of the event loop
 * after the first publish waiting for it (`setImmediate`), so every publish
 * issued in the same turn joins, those of I/O callbacks run in that turn
 * included. While a flush runs (a Postgres round trip), newcomers wait for
 * the one after it. At most one flush runs at a time; one takes whole
 * publishes up to `MAX_FLUSH_MESSAGES` messages and `MAX_FLUSH_BYTES` of
 * payload (a single larger publish goes alone): a store sends a shared
 * append as one statement, and a server's limit on one (Postgres: 1 GiB of
 * payload bytes) must not turn publishes that fit alone into a shared one
 * that never does.
 *
 * With a store that writes synchronously (`appendNow`: better-sqlite3), a
 * flush stores and settles its publishes in the same call, with no promise
 * of its own. Publishes made by the code those publishes resumed, within
 * `FOLLOW_HOPS` microtasks of the flush (a producer awaiting each publish in
 * a loop, or 64 of them at once), cannot be joined by anything from the
 * event loop until the current macrotask ends, so waiting a turn for them
 * would only add the turn: their flush runs as a microtask instead, after
 * every publish already queued at that depth, so concurrent producers still
 * share it. Such a run of flushes gives the event loop a turn once
 * `MAX_MICROTASK_RUN_MS` have passed, so timers and I/O (this process's own
 * subscriptions) are not starved by a producer in a loop.
 *
 * A publish resolves only once the append holding its messages has
 * committed, exactly as when it had its own. When a shared append fails,
 * nothing of it was stored (one transaction). After an error that may pass
 * (`transient`) the batch is retried whole; after any other, each of its
 * publishes is appended on its own, so a publish the store refuses fails
 * alone and the others are stored. Appends are idempotent by message ID, so
 * a retry never stores a message twice (not even when a commit landed but
 * its answer was lost), and one ID published twice in one flush is stored
 * once.
 */

/** Most messages one shared append carries (a larger single publish still goes whole). */
export const MAX_FLUSH_MESSAGES = 1000;
/** Most payload bytes one shared append carries, by `BatcherStore.bytes` (a larger single publish still goes whole). */
export const MAX_FLUSH_BYTES = 64 << 20;
/** Microtasks after a synchronous flush during which a new publish is flushed by a microtask. */
export const FOLLOW_HOPS = 8;
/** Longest a run of microtask flushes keeps the event loop, ms. */
export const MAX_MICROTASK_RUN_MS = 5;
/** Microtasks are queued as reactions to this (cheaper than Node's `queueMicrotask`, which makes an async resource per call). */
const RESOLVED = Promise.resolve();

interface Pending<T> {
  msgs: T[];
  /** What the publish resolves with. */
  value: unknown;
  resolve(value: unknown): void;
  reject(err: unknown): void;
}

/** How a `PublishBatcher` stores messages and what it tells once they are stored. */
export interface BatcherStore<T> {
  /** Stores the messages of several publishes in one transaction, once (no retries: on a failure the batcher calls `appendAlone`). */
  appendShared(msgs: T[]): Promise<void>;
  /**
   * Stores one publish's messages (or a whole batch's, after a transient
   * failure), with whatever retrying the caller does for a single publish;
   * `failed` is the error a first try already met, so it is not tried again
   * at once.
   */
  appendAlone(msgs: T[], failed?: unknown): Promise<void>;
  /** `appendShared` done before it returns, for a synchronous store; throws what it would reject with. */
  appendNow?: (msgs: T[]) => void;
  /** Called with each publish's messages once they are stored, before its promise resolves. */
  stored(msgs: T[]): void;
  /** Whether `err` may pass on its own (a busy database, a dropped connection), so a retry can help. */
  transient(err: unknown): boolean;
  /** The payload bytes of `msgs`, for `MAX_FLUSH_BYTES` (none counted when absent). */
  bytes?(msgs: T[]): number;
}

/** Gathers concurrent appends into shared ones. One per queue. */
export class PublishBatcher<T> {
  readonly #store: BatcherStore<T>;
  readonly #clock: () => number;
  #waiting: Array<Pending<T>> = [];
  #scheduled = false;
  #running: Promise<void> | undefined;
  /** Microtasks left in which a publish follows the last synchronous flush (0: none). */
  #hopsLeft = 0;
  /** Whether a `#hop` microtask is queued. */
  #hopping = false;
  /** The clock at the start of the last flush run from the event loop. */
  #turnStart = 0;
  readonly #onTurn = () => {
    this.#turnStart = this.#clock();
    this.#run();
  };
  readonly #onMicrotask = () => this.#run();
  readonly #hop = () => {
    if (--this.#hopsLeft > 0) void RESOLVED.then(this.#hop);
    else this.#hopping = false;
  };

  /** @param clock ms for `MAX_MICROTASK_RUN_MS` (tests replace it). */
  constructor(store: BatcherStore<T>, clock: () => number = () => performance.now()) {
    this.#store = store;
    this.#clock = clock;
  }

  /** Resolves with `value` once `msgs` are stored (in a shared append or on their own); rejects with the store's error for them. */
  append<V>(msgs: T[], value: V): Promise<V> {
    return new Promise<V>((resolve, reject) => {
      this.#waiting.push({ msgs, value, resolve: resolve as (v: unknown) => void, reject });
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
    if (this.#hopsLeft > 0 && this.#clock() - this.#turnStart < MAX_MICROTASK_RUN_MS) void RESOLVED.then(this.#onMicrotask);
    else setImmediate(this.#onTurn);
  }

  /** A synchronous flush settled its publishes: publishes in the next `FOLLOW_HOPS` microtasks follow it. */
  #follow(): void {
    this.#hopsLeft = FOLLOW_HOPS;
    if (this.#hopping) return;
    this.#hopping = true;
    void RESOLVED.then(this.#hop);
  }

  #run(): void {
    this.#scheduled = false;
    const running = this.#flush(this.#take());
    if (running === undefined) {
      this.#schedule();
      return;
    }
    this.#running = running.finally(() => {
      this.#running = undefined;
      this.#schedule();
    });
  }

  /** The next flush's publishes: whole ones, up to `MAX_FLUSH_MESSAGES` messages and `MAX_FLUSH_BYTES` (at least one). */
  #take(): Array<Pending<T>> {
    const batch: Array<Pending<T>> = [];
    const weigh = this.#store.bytes;
    let size = 0;
    let bytes = 0;
    while (this.#waiting.length > 0) {
      const next = this.#waiting[0]!;
      const b = weigh === undefined ? 0 : weigh(next.msgs);
      if (batch.length > 0 && (size + next.msgs.length > MAX_FLUSH_MESSAGES || bytes + b > MAX_FLUSH_BYTES)) break;
      batch.push(this.#waiting.shift()!);
      size += next.msgs.length;
      bytes += b;
    }
    return batch;
  }

  /** Stores `batch`; returns `undefined` when it settled every publish before returning, else a promise that does (never rejects). */
  #flush(batch: Array<Pending<T>>): Promise<void> | undefined {
    const appendNow = this.#store.appendNow;
    if (appendNow === undefined) return batch.length === 1 ? this.#alone(batch[0]!) : this.#shared(batch);
    const msgs = batch.length === 1 ? batch[0]!.msgs : batch.flatMap((p) => p.msgs);
    try {
      appendNow(msgs);
    } catch (err) {
      // Nothing of it was stored (a single publish goes on from the error it met).
      return batch.length === 1 ? this.#alone(batch[0]!, err) : this.#recover(batch, err);
    }
    for (const p of batch) this.#settle(p);
    this.#follow();
    return undefined;
  }

  async #shared(batch: Array<Pending<T>>): Promise<void> {
    try {
      await this.#store.appendShared(batch.flatMap((p) => p.msgs));
    } catch (err) {
      await this.#recover(batch, err);
      return;
    }
    for (const p of batch) this.#settle(p);
  }

  /**
   * A shared append of `batch` failed with `err`, storing nothing. An error
   * that may pass (a busy or locked database, a dropped connection) says
   * nothing about any one publish: the whole batch is retried as one
   * publish would be, and fails together if the error outlasts the
   * retries, so a database locked for a while costs one wait per retry,
   * not one per publish. Any other error, then or on a retry, may be one
   * publish's fault: each publish tries alone, so only that one fails.
   */
  async #recover(batch: Array<Pending<T>>, err: unknown): Promise<void> {
    if (this.#store.transient(err)) {
      try {
        await this.#store.appendAlone(batch.flatMap((p) => p.msgs), err);
      } catch (again) {
        if (this.#store.transient(again)) {
          for (const p of batch) p.reject(again);
          return;
        }
        await this.#eachAlone(batch);
        return;
      }
      for (const p of batch) this.#settle(p);
      return;
    }
    await this.#eachAlone(batch);
  }

  async #eachAlone(batch: Array<Pending<T>>): Promise<void> {
    await Promise.all(batch.map((p) => this.#alone(p)));
  }

  /** Settles `p` with its own append; never rejects. (No async frame: one publish at a time is the common case.) */
  #alone(p: Pending<T>, failed?: unknown): Promise<void> {
    let appended: Promise<void>;
    try {
      appended = this.#store.appendAlone(p.msgs, failed);
    } catch (err) {
      appended = Promise.reject(err);
    }
    return appended.then(() => this.#settle(p), p.reject);
  }

  /** `p` is stored: tells `stored`, then resolves it. */
  #settle(p: Pending<T>): void {
    try {
      this.#store.stored(p.msgs);
    } finally {
      p.resolve(p.value);
    }
  }
}
