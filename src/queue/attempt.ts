/**
 * One attempt at a delivery, and the rule that a queue runs at most one
 * attempt of a delivery at a time.
 *
 * An attempt is a claim: its claim token fences every write it makes. Once
 * its lease is gone (a heartbeat found it taken, or it lapsed because
 * renewals failed for a whole lease), the store may hand the delivery out
 * again, to another process or to this one. When the new claim comes back to
 * this queue while the old attempt's handler is still running, the old one is
 * given up (its signal aborts) and the new one's handler starts only once the
 * old handler has returned: the same delivery never runs twice at once in one
 * queue, and the old attempt's cleanup touches only what is its own (it is
 * keyed by its token, never by the delivery ID alone).
 */
import type { LeaseLostEvent } from './events.js';
import type { Claimed } from './types.js';

/** Why an attempt was given up. */
export type LossCause = LeaseLostEvent['op'];

/**
 * Where an attempt stands. It starts `held`; moves to `writing` when its
 * outcome goes to the store; and ends `lost` or `abandoned` when given up
 * (from any state: a claim that brings its delivery back, or a write that
 * finds the lease taken, loses a `writing` one too). Its worker slot is
 * counted apart (`slot`).
 */
export type AttemptState =
  /** Claimed, its handler waiting for a slot or running: heartbeats renew the lease, and it lapses at `deadline`. */
  | 'held'
  /**
   * Its handler returned and its outcome (ack, retry, kill) is being
   * written: heartbeats still renew the lease until the write lands, but a
   * lapse no longer matters here, and whether the lease was still held is
   * for the write's answer to tell, not a renewal's.
   */
  | 'writing'
  /** Its lease is gone: the handler was aborted and its outcome is discarded. */
  | 'lost'
  /** Close gave up waiting: the handler was aborted, its lease is kept to run out, its outcome is discarded. */
  | 'abandoned';

/** Throws for a state no `switch` over `AttemptState` handles: the compiler rejects the call unless every state is handled. */
export function unknownState(state: never): never {
  throw new Error(`attempt state ${String(state)} is not handled`);
}

/** A claimed delivery this instance holds: waiting for a slot, running, or having its outcome written. */
export class Attempt {
  readonly c: Claimed;
  readonly ctrl = new AbortController();
  /** Holds one of the `concurrency` worker slots: until the handler returns, or, for a retry or dead letter, until that is written. */
  slot = false;
  /** Local time (ms) by which the lease must have been renewed; the lease lapses then (its earliest possible end in the store). */
  deadline: number;
  /** Local time (ms) by which the store's copy of the lease has surely ended: the last claim or renewal reply plus the lease. */
  expiresBy: number;
  /** Where it stands: `held` until its outcome is written or it is given up. */
  state: AttemptState = 'held';
  /** Settles when the attempt has finished (handler returned, outcome written or discarded); set when it starts. */
  done?: Promise<void>;
  /** How long the handler ran, ms, once it has. */
  durationMs?: number;
  /** The earlier attempt of the same delivery this one replaced, while it may still be running: this one's handler waits for it. */
  after?: Promise<void>;
  /** Gives this attempt up (set by the subscription that owns it). */
  readonly lose: (cause: LossCause) => void;

  constructor(c: Claimed, deadline: number, expiresBy: number, lose: (a: Attempt, cause: LossCause) => void) {
    this.c = c;
    this.deadline = deadline;
    this.expiresBy = expiresBy;
    this.lose = (cause) => lose(this, cause);
  }

  /** It was given up (`lost` or `abandoned`): its handler was aborted, its outcome is discarded, its lease is no longer renewed. */
  get discarded(): boolean {
    switch (this.state) {
      case 'held':
      case 'writing':
        return false;
      case 'lost':
      case 'abandoned':
        return true;
      default:
        return unknownState(this.state);
    }
  }

  /** Its outcome is about to be written: a `held` attempt becomes `writing`; one given up meanwhile stays as it is. */
  startWriting(): void {
    switch (this.state) {
      case 'held':
        this.state = 'writing';
        return;
      case 'writing':
      case 'lost':
      case 'abandoned':
        return;
      default:
        unknownState(this.state);
    }
  }
}

/**
 * The newest attempt of each delivery a queue holds, across its
 * subscriptions. A claim that brings a delivery back while an older attempt
 * of it is held here replaces that attempt.
 */
export class AttemptRegistry {
  readonly #newest = new Map<string, Attempt>();

  /**
   * Records `a` as its delivery's newest attempt. An older attempt still held
   * is given up (`claim`: the store handed the delivery out again, so its
   * lease is gone), and `a` will wait for it to finish before running.
   *
   * An older attempt whose outcome is being written is left to that write's
   * answer: its handler has returned, and the new claim most often exists
   * because the write landed (a retry whose backoff ended, read back by
   * another subscription before the answer came). A write that finds the
   * lease taken reports the loss itself (`leaseLost` with its op); one that
   * landed reports what it wrote, and no loss.
   */
  add(a: Attempt): void {
    const id = a.c.deliveryId;
    const old = this.#newest.get(id);
    this.#newest.set(id, a);
    if (old === undefined || old.c.claimToken === a.c.claimToken) return;
    if (old.state !== 'writing') old.lose('claim');
    // Wait for the old attempt if it started; if it never did, for what it
    // was itself waiting for (a third claim arriving while the second still
    // waits must not start beside the first, which may still be running).
    a.after = old.done ?? old.after;
  }

  /** Forgets `a` once it has finished, unless a newer attempt replaced it. */
  remove(a: Attempt): void {
    const id = a.c.deliveryId;
    if (this.#newest.get(id) === a) this.#newest.delete(id);
  }

  /** How many deliveries have an attempt held. */
  get size(): number {
    return this.#newest.size;
  }
}
