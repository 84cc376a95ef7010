/**
 * The read side's view of a DiskQueue, as `AppendHost` (appender.ts) is the
 * write side's: the shared read cursor and ack ledger, the commit, a way to
 * write a record back for requeue, and the queue's open/closed/latched state.
 * Readers see the queue only through it, so what they may touch is written
 * down in one place, and reader.ts never imports queue.ts.
 */
import type { ClosedError } from '../errors.js';
import type { ResolvedOptions } from './options.js';
import type { AckLedger } from './ledger.js';
import type { ReadCursor } from './read-cursor.js';
import type { Waiters } from '../storage/waiters.js';

/** What a reader needs of its queue. */
export interface ReadHost<T> {
  readonly opts: Pick<ResolvedOptions<T>, 'codec' | 'stampRecords'>;
  readonly cursor: ReadCursor;
  readonly ledger: AckLedger;
  /** Woken when records are published; closed when the queue closes. */
  readonly published: Waiters;
  readonly counters: { delivered: number };
  /** Writes a record at the tail; `bypassCaps` lets requeue work on a full queue. */
  readonly appender: { placeOne(payload: Uint8Array, bypassCaps: boolean): void };
  /** @throws ClosedError the queue is closed. */
  checkOpen(): void;
  /** @throws ClosedError the queue is closed; IOError it is latched. */
  checkWritable(): void;
  closedError(): ClosedError;
  /**
   * Moves the commit cursor across the ledger's done prefix (reclaiming,
   * waking `addWait`, writing headers as the policy says); returns whether it
   * moved. Synchronous, so a read can retire before anything awaits.
   *
   * @throws IOError the queue is latched, or a commit's header write failed.
   */
  settleCommits(): boolean;
  /** What `ops` writes or commits just done need before they may resolve: a flush to wait for, or nothing. */
  persist(ops: number): Promise<void> | undefined;
}
