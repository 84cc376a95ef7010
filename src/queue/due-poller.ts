/**
 * The poller shared by every subscription on one store object: it finds
 * which subscriptions have due work, so an idle subscription costs nothing.
 *
 * Each subscription registers its (topic, group), its `pollIntervalMs` and a
 * way to wake its claim loop. Once per interval (the smallest interval of the
 * subscriptions registered, counted from the end of the previous tick) the
 * poller asks the store, in one call for all of them, which pairs may have a
 * claimable delivery (`Store.duePairs`): pending and due (published, its
 * `deliverAt` reached, a retry's backoff over), leased with its lease expired
 * (another instance crashed or stalled), or, on a store that makes
 * deliveries lazily, a message the group has not been given yet. It wakes
 * the subscriptions of those pairs and no others; each then claims as usual.
 * Work that appears between ticks wakes its subscriptions sooner by the
 * engine's other wake sources (a publish through this queue, the wake timer,
 * the store's `listen`), exactly as before.
 *
 * A store without `duePairs` gets the old behaviour: every tick wakes every
 * subscription, and each claims. A `duePairs` that fails is reported to the
 * subscriptions' queues and the tick wakes every subscription, so each claims
 * (and reports its own failure) as it would without the poller.
 *
 * Only one call is in flight at a time; ticks do not overlap. When the last
 * subscription leaves, the timer stops and a call in flight is aborted (its
 * answer is no longer needed). `idle()` is what a closing queue awaits before
 * closing the store.
 */
import type { ErrorReporter } from './options.js';
import type { ConsumerGroup, Store } from './types.js';

/** One subscription as the poller sees it. */
export interface PollEntry {
  readonly topic: string;
  readonly group: string;
  /** Its `pollIntervalMs`. */
  readonly intervalMs: number;
  /** Cuts the subscription's wait short: it claims. */
  wake(): void;
  /** Where a failure of the poll query is reported (its queue's `onError`). */
  readonly report: ErrorReporter;
}

const pairKey = (topic: string, group: string): string => `${topic}\u0000${group}`;

const pollers = new WeakMap<Store, DuePoller>();

export class DuePoller {
  readonly #store: Store;
  /** Registered subscriptions by (topic, group). */
  readonly #pairs = new Map<string, Set<PollEntry>>();
  /**
   * The registered pairs as `duePairs` takes them, made again only when a
   * pair comes or goes: the same frozen array from tick to tick lets a store
   * reuse what it made of it (the Postgres store, its encoded parameters).
   */
  #pairList: readonly ConsumerGroup[] | undefined;
  /** How many registered subscriptions have each interval: the tick period is the smallest key. */
  readonly #intervals = new Map<number, number>();
  #size = 0;
  #timer: NodeJS.Timeout | undefined;
  /** When `#timer` fires (ms since the epoch), or Infinity. */
  #timerAt = Infinity;
  /** The tick in flight. */
  #running: Promise<void> | undefined;
  #runningCtl: AbortController | undefined;
  /** Ticks run so far (`duePairs` calls, or fallback wakes): for tests and benchmarks. */
  ticks = 0;

  /** The poller of `store`, made on first use: one per store object in the process. */
  static of(store: Store): DuePoller {
    let p = pollers.get(store);
    if (!p) pollers.set(store, (p = new DuePoller(store)));
    return p;
  }

  private constructor(store: Store) {
    this.#store = store;
  }

  /** How many subscriptions are registered. */
  get size(): number {
    return this.#size;
  }

  /** Adds a subscription; returns the function that removes it (idempotent). */
  register(e: PollEntry): () => void {
    const key = pairKey(e.topic, e.group);
    let set = this.#pairs.get(key);
    if (!set) {
      this.#pairs.set(key, (set = new Set()));
      this.#pairList = undefined;
    }
    set.add(e);
    this.#size++;
    this.#intervals.set(e.intervalMs, (this.#intervals.get(e.intervalMs) ?? 0) + 1);
    if (this.#running === undefined) this.#arm(e.intervalMs);
    let removed = false;
    return () => {
      if (removed) return;
      removed = true;
      this.#remove(key, e);
    };
  }

  #remove(key: string, e: PollEntry): void {
    const set = this.#pairs.get(key);
    if (!set?.delete(e)) return;
    if (set.size === 0) {
      this.#pairs.delete(key);
      this.#pairList = undefined;
    }
    this.#size--;
    const n = (this.#intervals.get(e.intervalMs) ?? 1) - 1;
    if (n === 0) this.#intervals.delete(e.intervalMs);
    else this.#intervals.set(e.intervalMs, n);
    if (this.#size === 0) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
      this.#timerAt = Infinity;
      this.#runningCtl?.abort();
    }
  }

  /** Resolves once no tick is in flight (a closing queue awaits it before closing the store). */
  async idle(): Promise<void> {
    while (this.#running !== undefined) await this.#running;
  }

  #interval(): number {
    let min = Infinity;
    for (const ms of this.#intervals.keys()) if (ms < min) min = ms;
    return min;
  }

  /** Makes the next tick come no later than `ms` from now. */
  #arm(ms: number): void {
    if (this.#size === 0 || !Number.isFinite(ms)) return;
    const at = Date.now() + ms;
    if (at >= this.#timerAt) return;
    clearTimeout(this.#timer);
    this.#timerAt = at;
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#timerAt = Infinity;
      this.#running = this.#tick().finally(() => {
        this.#running = undefined;
        this.#runningCtl = undefined;
        this.#arm(this.#interval());
      });
    }, ms);
  }

  async #tick(): Promise<void> {
    if (this.#size === 0) return;
    this.ticks++;
    const duePairs = this.#store.duePairs?.bind(this.#store);
    if (!duePairs) {
      this.#wakeAll();
      return;
    }
    const pairs = (this.#pairList ??= Object.freeze(Array.from(this.#pairs.values(), (set) => {
      const first = set.values().next().value as PollEntry;
      return Object.freeze({ topic: first.topic, group: first.group });
    })));
    const ctl = new AbortController();
    this.#runningCtl = ctl;
    let due: ConsumerGroup[];
    try {
      due = await duePairs(pairs, ctl.signal);
    } catch (err) {
      if (ctl.signal.aborted) return; // nobody is left to want the answer
      const reporters = new Set<ErrorReporter>();
      for (const set of this.#pairs.values()) for (const e of set) reporters.add(e.report);
      for (const r of reporters) r(err, 'poll');
      this.#wakeAll(); // each subscription claims, as it would without the poller
      return;
    }
    if (ctl.signal.aborted) return;
    for (const p of due) {
      const set = this.#pairs.get(pairKey(p.topic, p.group));
      if (set) for (const e of [...set]) e.wake();
    }
  }

  #wakeAll(): void {
    for (const set of [...this.#pairs.values()]) for (const e of [...set]) e.wake();
  }
}
