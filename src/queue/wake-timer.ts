/**
 * Timed wake-ups of a queue's subscriptions: "topic T may have claimable work
 * at time t" (a retry's backoff ends, a scheduled message comes due, a lease
 * runs out). One timer per queue, set for the earliest pending wake-up; the
 * rest wait in a binary min-heap. Only a latency optimisation: polling finds
 * the same work later, so past `MAX_PENDING` further wake-ups are dropped.
 */

import { MAX_TIMER_MS } from './options.js';

/** Most wake-ups kept at once. */
export const MAX_PENDING = 10_000;

/**
 * Added to every wake-up time, ms. A store's clock may run a little behind
 * ours (or round differently), and a wake that lands just before the work is
 * due finds nothing and falls back to the poll interval.
 */
export const WAKE_MARGIN_MS = 2;

interface Entry {
  at: number;
  topic: string;
}

export class WakeTimer {
  readonly #wake: (topic: string) => void;
  readonly #now: () => number;
  readonly #heap: Entry[] = [];
  #timer: NodeJS.Timeout | undefined;
  /** When `#timer` fires (ms), or Infinity. */
  #timerAt = Infinity;
  #stopped = false;

  constructor(wake: (topic: string) => void, now: () => number = Date.now) {
    this.#wake = wake;
    this.#now = now;
  }

  /** How many wake-ups are pending. */
  get size(): number {
    return this.#heap.length;
  }

  /** Wakes `topic`'s subscriptions at local time `at` (ms since the epoch), plus `WAKE_MARGIN_MS`. */
  schedule(topic: string, at: number): void {
    if (this.#stopped || !Number.isFinite(at) || this.#heap.length >= MAX_PENDING) return;
    push(this.#heap, { at: at + WAKE_MARGIN_MS, topic });
    this.#arm();
  }

  /** Drops every pending wake-up and the timer. Later `schedule` calls do nothing. */
  stop(): void {
    this.#stopped = true;
    this.#heap.length = 0;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Infinity;
  }

  #arm(): void {
    const next = this.#heap[0];
    if (!next || next.at >= this.#timerAt) return;
    clearTimeout(this.#timer);
    const now = this.#now();
    // Node's timers take at most MAX_TIMER_MS (about 24.8 days): a longer
    // delay would fire after 1 ms, find nothing due and re-arm, over and
    // over. A wake-up further off fires the timer early once and re-arms.
    const delay = Math.min(Math.max(0, next.at - now), MAX_TIMER_MS);
    this.#timerAt = delay === MAX_TIMER_MS ? now + delay : next.at;
    this.#timer = setTimeout(() => this.#fire(), delay);
  }

  #fire(): void {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    const now = this.#now();
    const topics = new Set<string>();
    while (this.#heap.length > 0 && this.#heap[0]!.at <= now) topics.add(pop(this.#heap)!.topic);
    for (const t of topics) this.#wake(t);
    this.#arm();
  }
}

function push(h: Entry[], e: Entry): void {
  h.push(e);
  let i = h.length - 1;
  while (i > 0) {
    const p = (i - 1) >> 1;
    if (h[p]!.at <= e.at) break;
    h[i] = h[p]!;
    i = p;
  }
  h[i] = e;
}

function pop(h: Entry[]): Entry | undefined {
  const top = h[0];
  const last = h.pop();
  if (h.length === 0 || last === undefined) return top;
  let i = 0;
  for (;;) {
    const l = 2 * i + 1;
    if (l >= h.length) break;
    const r = l + 1;
    const c = r < h.length && h[r]!.at < h[l]!.at ? r : l;
    if (h[c]!.at >= last.at) break;
    h[i] = h[c]!;
    i = c;
  }
  h[i] = last;
  return top;
}
