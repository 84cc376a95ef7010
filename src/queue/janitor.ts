/**
 * The janitor: a background pass, every `janitorIntervalMs`, that deletes dead
 * deliveries older than `retentionHours` and finished messages older than
 * `ackedRetentionHours`. When the store offers `acquireJanitor`, only the
 * instance holding that role purges, so instances sharing a store do not all
 * delete the same rows.
 */
import { settledBefore } from './abortable.js';
import type { GuardedStore } from './abortable.js';
import type { ErrorReporter } from './options.js';
import type { PurgePolicy } from './types.js';

/** Rows of each kind deleted per `Store.purge` call; a pass calls it until a call comes back short. */
export const PURGE_BATCH = 500;
/** A pass stops after this many batches and leaves the rest to the next pass. */
const MAX_BATCHES_PER_PASS = 200;

/** Runs purge passes on a timer. The timer does not keep the process alive. */
export class Janitor {
  readonly #store: GuardedStore;
  readonly #policy: PurgePolicy;
  readonly #intervalMs: number;
  readonly #holder: string;
  readonly #onError: ErrorReporter;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<number> | undefined;

  constructor(store: GuardedStore, policy: PurgePolicy, intervalMs: number, holder: string, onError: ErrorReporter) {
    this.#store = store;
    this.#policy = policy;
    this.#intervalMs = intervalMs;
    this.#holder = holder;
    this.#onError = onError;
  }

  /** Starts the timer; the first pass runs one interval from now. */
  start(): void {
    this.#timer = setInterval(() => {
      this.runOnce().catch((err) => this.#onError(err, 'janitor'));
    }, this.#intervalMs);
    this.#timer.unref();
  }

  /** One pass; resolves with the rows removed (0 when another instance holds the role or a pass is running). */
  runOnce(): Promise<number> {
    if (this.#running) return Promise.resolve(0);
    this.#running = this.#pass().finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  async #pass(): Promise<number> {
    const store = this.#store;
    // Holding the role for two intervals lets the holder keep it from pass to pass.
    if (store.inner.acquireJanitor && !(await store.acquireJanitor(this.#holder, 2 * this.#intervalMs))) return 0;
    let total = 0;
    for (let i = 0; i < MAX_BATCHES_PER_PASS; i++) {
      const n = await store.purge(this.#policy, PURGE_BATCH);
      total += n;
      if (n < PURGE_BATCH) break;
    }
    return total;
  }

  /** Stops the timer and waits for a running pass, until `signal` aborts (the store's calls are cut short then too). */
  async stop(signal: AbortSignal): Promise<void> {
    clearInterval(this.#timer);
    if (this.#running) await settledBefore(this.#running, signal);
  }
}
