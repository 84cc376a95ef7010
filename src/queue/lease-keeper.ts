/**
 * The leases of one subscription's attempts. A heartbeat every third of a
 * lease renews every lease not given up; it runs only while the subscription
 * holds an attempt, so an idle subscription arms no timer (10,000 idle ones
 * beating for nothing cost about 2% of a core). A timer gives up an attempt
 * whose lease deadline passed with no renewal confirmed (it lapses) at once,
 * not at the next heartbeat's reply: past its deadline the store may already
 * have handed the delivery to someone else.
 */
import type { GuardedStore } from './abortable.js';
import { type Attempt, type LossCause, unknownState } from './attempt.js';
import type { ErrorReporter } from './options.js';

/** What the keeper needs from its subscription. */
export interface LeaseKeeperHost {
  /** The store, its calls cut short once the subscription's close deadline passes (`stopped`). */
  readonly store: GuardedStore;
  /** The subscription's lease length, ms. */
  readonly leaseMs: number;
  /** Aborted when close's deadline passes: a failed renewal is then not reported. */
  readonly stopped: AbortSignal;
  readonly onError: ErrorReporter;
  /** Gives an attempt up: its lease lapsed (`lapse`) or a renewal found it gone (`heartbeat`). */
  lose(job: Attempt, cause: LossCause): void;
}

/** Holds a subscription's attempts by claim token, renews their leases and gives up the ones that lapse. */
export class LeaseKeeper {
  readonly #host: LeaseKeeperHost;
  /** Every attempt the subscription holds, by claim token. */
  readonly #jobs = new Map<string, Attempt>();
  /** Fires at the earliest lease deadline of `#jobs`, to give up attempts whose lease lapsed. */
  #lapseTimer: NodeJS.Timeout | undefined;
  #lapseAt = Infinity;
  #heartbeat: NodeJS.Timeout | undefined;
  /** Between `start` and `stop`: the heartbeat runs whenever an attempt is held. */
  #started = false;
  #beating = false;
  /** The heartbeat in flight, awaited by `stop` so no store call outlives it. */
  #beatInFlight: Promise<void> = Promise.resolve();

  constructor(host: LeaseKeeperHost) {
    this.#host = host;
  }

  /** Lets the heartbeat run from the first attempt held. */
  start(): void {
    this.#started = true;
    if (this.#jobs.size > 0) this.#beatWhileHolding();
  }

  /** Holds `job` from now on: its lease is renewed, and it lapses at its deadline unless a renewal is confirmed first. */
  add(job: Attempt): void {
    this.#jobs.set(job.c.claimToken, job);
    this.#armLapse(job.deadline);
    if (this.#started) this.#beatWhileHolding();
  }

  /** Forgets `job`: it holds nothing any more. The heartbeat stops with the last one. */
  remove(job: Attempt): void {
    this.#jobs.delete(job.c.claimToken);
    if (this.#jobs.size === 0) {
      clearInterval(this.#heartbeat);
      this.#heartbeat = undefined;
    }
  }

  #beatWhileHolding(): void {
    this.#heartbeat ??= setInterval(() => {
      if (!this.#beating) this.#beatInFlight = this.#beat();
    }, this.#host.leaseMs / 3);
  }

  /** Every attempt held. */
  attempts(): IterableIterator<Attempt> {
    return this.#jobs.values();
  }

  /** Gives up the attempts whose lease lapsed by local time `now` (ms), if any may have. */
  giveUpLapsed(now: number): void {
    if (this.#lapseAt <= now) this.#checkLapses();
  }

  /** Stops the heartbeat and the lapse timer; resolves once a heartbeat in flight has finished. */
  async stop(): Promise<void> {
    this.#started = false;
    clearInterval(this.#heartbeat);
    this.#heartbeat = undefined;
    clearTimeout(this.#lapseTimer);
    await this.#beatInFlight;
  }

  /** Makes the lapse timer fire no later than `at` (local ms). */
  #armLapse(at: number): void {
    if (at >= this.#lapseAt) return;
    clearTimeout(this.#lapseTimer);
    this.#lapseAt = at;
    this.#lapseTimer = setTimeout(() => this.#checkLapses(), Math.max(0, at - Date.now()));
  }

  /**
   * Gives up every attempt whose lease deadline has passed without a
   * confirmed renewal, and re-arms the timer for the next deadline.
   */
  #checkLapses(): void {
    clearTimeout(this.#lapseTimer);
    this.#lapseAt = Infinity;
    const now = Date.now();
    let next = Infinity;
    for (const j of this.#jobs.values()) {
      switch (j.state) {
        case 'held':
          if (j.deadline <= now) this.#host.lose(j, 'lapse');
          else if (j.deadline < next) next = j.deadline;
          break;
        case 'writing': // the write's answer tells whether the lease was still held
        case 'lost':
        case 'abandoned':
          break;
        default:
          unknownState(j.state);
      }
    }
    if (next !== Infinity) this.#armLapse(next);
  }

  /** Renews every lease not given up; gives up the attempts whose lease is gone or has lapsed. */
  async #beat(): Promise<void> {
    if (this.#beating) return;
    this.#beating = true;
    try {
      const lease = this.#host.leaseMs;
      this.#checkLapses();
      const renew = [...this.#jobs.values()].filter((j) => !j.discarded);
      if (renew.length === 0) return;
      const sent = Date.now();
      let held: Set<string>;
      try {
        held = new Set(await this.#host.store.extend(renew.map((j) => j.c), lease));
      } catch (err) {
        // One failed heartbeat is harmless; a lease with no renewal confirmed for its whole length lapses (#checkLapses).
        if (!this.#host.stopped.aborted) this.#host.onError(err, 'heartbeat');
        return;
      }
      const replyAt = Date.now();
      for (const j of renew) {
        // Finished and forgotten while the renewal was in flight.
        if (this.#jobs.get(j.c.claimToken) !== j) continue;
        switch (j.state) {
          case 'held':
            if (held.has(j.c.deliveryId)) {
              j.deadline = sent + lease;
              j.expiresBy = replyAt + lease;
            } else this.#host.lose(j, 'heartbeat');
            break;
          // Finished: an outcome written meanwhile makes the row look not held to a late renewal.
          case 'writing':
          // Given up while the renewal was in flight.
          case 'lost':
          case 'abandoned':
            break;
          default:
            unknownState(j.state);
        }
      }
    } finally {
      this.#beating = false;
    }
  }
}
