/**
 * The throughput chart's numbers: completed and dead-lettered deliveries per
 * second, and the backlog (pending + leased over every group), for the last
 * `WINDOW_S` seconds at one-second resolution.
 *
 * Two ways of counting, chosen by what the queue offers:
 * - events: the queue emits `completed` and `deadLettered` (it is the same
 *   process that consumes); every event is counted in the second it happened.
 * - sampled: only `stats()` is available (another process consumes). The
 *   dead-lettered rate is each group's rise in `dead` between two samples,
 *   spread over the seconds between them. The completed rate is each
 *   group's fall in `pending + leased` less its rise in `dead`, spread the
 *   same way: deliveries that left the backlog without dying. Publishes in
 *   the same interval add to the backlog and hide as many completions, so
 *   this is a lower bound (exact when nothing is published meanwhile).
 *   A fall in `dead` (the janitor purged, a removed group) counts as zero,
 *   never as a negative rate, as does a backlog that grew; a group that
 *   appears after the first sample starts from zero dead and from the
 *   backlog it holds then.
 */
import type { GroupRow } from './source.js';

/** Seconds the chart covers. */
export const WINDOW_S = 15 * 60;

/** The chart's data: parallel arrays, `t` in seconds since the epoch; null where nothing is known. */
export interface Series {
  mode: 'events' | 'sampled';
  t: number[];
  completed: (number | null)[];
  deadLettered: (number | null)[];
  backlog: (number | null)[];
}

interface Second {
  completed: number;
  deadLettered: number;
  backlog: number | null;
  /** Whether the rates of this second are known (sampled mode: covered by two samples). */
  known: boolean;
}

export class Throughput {
  readonly mode: 'events' | 'sampled';
  readonly #seconds = new Map<number, Second>();
  /** Each group's `dead` and `pending + leased` at the last sample. */
  readonly #last = new Map<string, { dead: number; backlog: number }>();
  #lastSampleS: number | null = null;
  /** Dead letters and completions sampled since the last second the rates were spread over (samples within one second add up here). */
  #carry = { dead: 0, completed: 0 };
  readonly #now: () => number;
  /** The second counting began: nothing is known before it. */
  readonly #startS: number;

  /** `now` returns milliseconds since the epoch (tests pass a fake clock). */
  constructor(mode: 'events' | 'sampled', now: () => number = Date.now) {
    this.mode = mode;
    this.#now = now;
    this.#startS = Math.floor(now() / 1000);
  }

  #at(s: number): Second {
    let b = this.#seconds.get(s);
    if (!b) {
      b = { completed: 0, deadLettered: 0, backlog: null, known: this.mode === 'events' };
      this.#seconds.set(s, b);
      this.#trim(s);
    }
    return b;
  }

  #trim(nowS: number): void {
    for (const s of this.#seconds.keys()) if (s <= nowS - WINDOW_S) this.#seconds.delete(s);
  }

  /** Counts one event (events mode). */
  count(kind: 'completed' | 'deadLettered'): void {
    this.#at(Math.floor(this.#now() / 1000))[kind]++;
  }

  /** Records one sample of every group's counts. */
  sample(rows: GroupRow[]): void {
    const nowS = Math.floor(this.#now() / 1000);
    const b = this.#at(nowS);
    b.backlog = rows.reduce((n, r) => n + r.pending + r.leased, 0);
    if (this.mode !== 'sampled') return;
    let died = 0;
    let completed = 0;
    const seen = new Set<string>();
    const first = this.#lastSampleS === null;
    for (const r of rows) {
      const k = JSON.stringify([r.topic, r.group]);
      seen.add(k);
      const now = { dead: r.dead, backlog: r.pending + r.leased };
      // A group first seen after the first sample was registered since, with no dead deliveries; its backlog starts from now.
      const before = this.#last.get(k) ?? { dead: first ? r.dead : 0, backlog: now.backlog };
      const rise = Math.max(0, now.dead - before.dead);
      died += rise;
      completed += Math.max(0, before.backlog - now.backlog - rise);
      this.#last.set(k, now);
    }
    for (const k of this.#last.keys()) if (!seen.has(k)) this.#last.delete(k);
    const from = this.#lastSampleS;
    if (first || from === null) {
      this.#lastSampleS = nowS;
      return;
    }
    this.#carry.dead += died;
    this.#carry.completed += completed;
    if (nowS <= from) return;
    this.#lastSampleS = nowS;
    const span = nowS - from;
    for (let s = from + 1; s <= nowS; s++) {
      const sec = this.#at(s);
      sec.deadLettered += this.#carry.dead / span;
      sec.completed += this.#carry.completed / span;
      sec.known = true;
    }
    this.#carry = { dead: 0, completed: 0 };
  }

  /** The last `WINDOW_S` seconds, ending with the current one. */
  series(): Series {
    const nowS = Math.floor(this.#now() / 1000);
    const out: Series = { mode: this.mode, t: [], completed: [], deadLettered: [], backlog: [] };
    for (let s = nowS - WINDOW_S + 1; s <= nowS; s++) {
      const b = this.#seconds.get(s);
      out.t.push(s);
      const known = this.mode === 'events' ? s >= this.#startS : (b?.known ?? false);
      out.completed.push(known ? (b?.completed ?? 0) : null);
      out.deadLettered.push(known ? (b?.deadLettered ?? 0) : null);
      out.backlog.push(b?.backlog ?? null);
    }
    return out;
  }
}
