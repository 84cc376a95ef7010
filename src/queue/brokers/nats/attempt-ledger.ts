/**
 * The attempt ledger: which attempt of a delivery last started, and whether
 * it failed, for deliveries that come back. JetStream's delivery count
 * counts every hand-out, including messages a crashed process had pulled
 * and never started; charging those would spend the attempts of every
 * message pulled beside one that crashes its consumer. So ferry counts
 * starts instead:
 *
 * - A first delivery runs without touching the ledger (the common case
 *   costs nothing); its start is assumed when it comes back.
 * - Before a redelivery's handler runs, its attempt number (the last
 *   recorded start plus one, or 2 with no record) is written. A handler
 *   that fails writes `failed` over its own record before the negative ack.
 * - A redelivery whose last start has no failure recorded was not given back
 *   by a handler: its holder crashed, stalled or lost the connection, maybe
 *   because of it. It is *recovered* and runs alone (see subscription.ts).
 *
 * One subject per (topic, group, stream sequence) in the stream
 * `<prefix>-ATT`, one message kept per subject. Writes expect the subject's
 * last sequence to be the one read, so of two processes that both believe
 * they hold a delivery only one records its start or its failure; the other
 * learns that its lease was lost. Entries are purged when the delivery
 * completes or dies, and expire with the stream's max age otherwise.
 */
import { JetStreamApiError, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { escapeName } from './names.js';

/** What the ledger says of one delivery. */
export interface AttemptRecord {
  /** The attempt that last started (1-based). */
  readonly attempt: number;
  /** Whether that attempt's handler failed (it gave the message back itself). */
  readonly failed: boolean;
  /** The record's stream sequence, which the next write expects; 0 when there is no record. */
  readonly seq: number;
}

/** Another process wrote this delivery's record since it was read: the lease is someone else's. */
export class AttemptConflict extends Error {}

/** JetStream's "wrong last sequence" API error. */
const WRONG_LAST_SEQUENCE = 10071;

/** The ledger stream of `prefix`. */
export function attemptLedgerStream(prefix: string): string {
  return `${prefix}-ATT`;
}

/** The subjects of `prefix`'s ledger stream (`<prefix>-att.>`). */
export function attemptLedgerSubjects(prefix: string): string {
  return `${prefix}-att.>`;
}

/** The ledger subjects of every delivery of (`topic`, `group`), for a purge. */
export function attemptLedgerGroupFilter(prefix: string, topic: string, group: string): string {
  return `${prefix}-att.${escapeName(topic)}.${escapeName(group)}.*`;
}

export class AttemptLedger {
  readonly #js: JetStreamClient;
  readonly #jsm: JetStreamManager;
  readonly #stream: string;
  readonly #base: string;
  readonly #ensure: () => Promise<void>;

  /**
   * @param ensure creates the ledger stream unless it exists (the queue does this once).
   */
  constructor(js: JetStreamClient, jsm: JetStreamManager, prefix: string, topic: string, group: string, ensure: () => Promise<void>) {
    this.#js = js;
    this.#jsm = jsm;
    this.#stream = attemptLedgerStream(prefix);
    this.#base = `${prefix}-att.${escapeName(topic)}.${escapeName(group)}.`;
    this.#ensure = ensure;
  }

  /** The record of the delivery at stream sequence `streamSeq`; `{ attempt: 0, seq: 0 }` when there is none. Rejects with the client's error. */
  async read(streamSeq: number): Promise<AttemptRecord> {
    await this.#ensure();
    const m = await this.#jsm.streams.getMessage(this.#stream, { last_by_subj: this.#base + streamSeq });
    if (m === null) return { attempt: 0, failed: false, seq: 0 };
    const [n, state] = new TextDecoder().decode(m.data).split(' ');
    return { attempt: Number(n) || 0, failed: state === 'failed', seq: m.seq };
  }

  /**
   * Writes that `attempt` of the delivery started (or failed), expecting the
   * record read at `expectSeq`. Resolves with the new record's sequence.
   * Rejects with `AttemptConflict` when another write came first, else with
   * the client's error.
   */
  async write(streamSeq: number, attempt: number, failed: boolean, expectSeq: number): Promise<number> {
    await this.#ensure();
    const body = new TextEncoder().encode(`${attempt} ${failed ? 'failed' : 'started'}`);
    try {
      const ack = await this.#js.publish(this.#base + streamSeq, body, { expect: { lastSubjectSequence: expectSeq } });
      return ack.seq;
    } catch (err) {
      if (err instanceof JetStreamApiError && err.code === WRONG_LAST_SEQUENCE) throw new AttemptConflict('another attempt of this delivery was recorded first', { cause: err });
      throw err;
    }
  }

  /** Drops the delivery's record (it completed or died). */
  async forget(streamSeq: number): Promise<void> {
    await this.#jsm.streams.purge(this.#stream, { filter: this.#base + streamSeq });
  }
}
