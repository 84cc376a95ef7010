/**
 * The sending side of `ferry forward`: pops records from a spool, delivers
 * them with up to `concurrency` deliveries outstanding, and commits them in
 * spool order.
 *
 * The deliveries form a window over the head of the spool, oldest first. A
 * delivery is retried on the same records (capped, jittered backoff) until
 * the target accepts it. A record is committed only when its delivery and
 * every delivery before it were accepted, so the window moves only when its
 * oldest delivery is accepted: a delivery that keeps failing holds up the
 * ones after it, and at most `concurrency` deliveries are outstanding or
 * waiting for their commit. Killed at any point, everything not committed is
 * still in the spool.
 *
 * `Spool.popRun` returns records without removing them, from the head or
 * from after a given record: each new delivery takes the records after the
 * newest one in the window, so nothing in the window is read again. The
 * accepted prefix of the window is committed with one `commitRuns`. A run
 * carries its records' bytes in one copy, with no object per record.
 */
import { isFerryError } from '../errors.js';
import type { PoppedRun, Spool } from '../spool/index.js';
import { describe, sleep } from './common.js';
import { fullJitterBackoffMs } from '../backoff.js';
import type { Deliver } from './deliver.js';

/** Payload bytes per delivery before a batch is cut short of its record count. */
export const DELIVERY_BYTES = 4 << 20;

/** How the sender batches, overlaps and retries. */
export interface SenderOptions {
  /** Most records per delivery. */
  batch: number;
  /** Most deliveries outstanding (or accepted and waiting for an older one). */
  concurrency: number;
  retryBaseMs: number;
  retryMaxMs: number;
  /** Payload bytes per delivery before a batch is cut short (default {@link DELIVERY_BYTES}). */
  deliveryBytes?: number;
  /** Milliseconds an idle sender waits before it looks at the spool again (default {@link IDLE_POLL_MS}). */
  idlePollMs?: number;
}

/** The input side, as the sender sees it. */
export interface SenderInput {
  /** True once nothing more will be appended. */
  done(): boolean;
  /** Called after each commit: the head moved, so a full spool has room again. */
  committed?(): void;
  /**
   * Settles once {@link done} turned true (or the input failed): wakes a
   * sender that found the spool empty, so the run ends when the last sync
   * does rather than at the next look.
   */
  ended: Promise<unknown>;
}

/** What the sender reports as it goes. */
export interface SenderCounts {
  /** Records committed. */
  out: number;
  retries: number;
  lastError: string;
  /** Damaged spans of the spool the head stepped past (each reported through `noteDamage`). */
  damaged: number;
}

interface Flight {
  run: PoppedRun;
  accepted: boolean;
  done: Promise<void>;
}

/** How long an idle sender waits for an append before it looks again, by default. */
export const IDLE_POLL_MS = 200;

/**
 * Pops, delivers and commits until `stop` aborts, or until `input.done()` is
 * true and the spool is empty. On `stop`, deliveries under way are let
 * finish (a retry wait is cut short) and the accepted prefix is committed.
 *
 * @throws what `popRun` throws other than damage (a `FerryError` other than
 * `ERR_CLOSED`, which is counted in `damaged`, handed to `noteDamage` and
 * stepped past).
 */
export async function runSender(
  spool: Spool,
  deliver: Deliver,
  o: SenderOptions,
  counts: SenderCounts,
  stop: AbortSignal,
  input: SenderInput,
  noteError: (reason: string) => void = () => {},
  noteDamage: (err: unknown) => void = () => {},
): Promise<void> {
  const maxBytes = o.deliveryBytes ?? DELIVERY_BYTES;
  const idlePollMs = o.idlePollMs ?? IDLE_POLL_MS;
  const halt = new AbortController();
  const onStop = () => halt.abort();
  stop.addEventListener('abort', onStop, { once: true });
  if (stop.aborted) halt.abort();
  // One listener for the whole run, waking whichever wait is current
  // (an EventTarget listener added and removed per wait cost more than the wait).
  halt.signal.addEventListener('abort', () => kick(), { once: true });
  // The end of the input wakes an idle sender at once: the intake's last sync
  // appends nothing, so no append would, and the next look came up to
  // IDLE_POLL_MS later (a 2,000-line forward of about 25 ms took 250 ms).
  input.ended.then(
    () => kick(),
    () => kick(),
  );

  const window: Flight[] = [];
  const commits: Promise<void>[] = [];
  let kick: () => void = () => {};
  /** The wait on the spool for an append, while one is pending; `ended` drops it when the sender returns. */
  let appendWait: Promise<void> | undefined;
  /** An append settled `appendWait` since the loop last began popping. */
  let appended = false;
  const ended = new AbortController();

  const commitReady = () => {
    const ready: PoppedRun[] = [];
    while (window[0]?.accepted) {
      const f = window.shift()!;
      ready.push(f.run);
      counts.out += f.run.count;
    }
    // One commit for every record of the accepted prefix: the head moves at
    // once, and the cursor is written once (awaited at the end), not per record.
    if (ready.length > 0) {
      commits.push(spool.commitRuns(ready));
      input.committed?.();
    }
    if (commits.length > 1024) {
      const settled = Promise.all(commits.splice(0)).then(() => {});
      commits.push(settled);
    }
  };

  const launch = (run: PoppedRun) => {
    const f: Flight = { run, accepted: false, done: Promise.resolve() };
    window.push(f);
    f.done = (async () => {
      for (let attempt = 1; !halt.signal.aborted; attempt++) {
        try {
          await deliver(run);
          f.accepted = true;
          return;
        } catch (err) {
          counts.retries++;
          counts.lastError = (err as Error).message;
          noteError(counts.lastError);
          await sleep(fullJitterBackoffMs(attempt, o.retryBaseMs, o.retryMaxMs), halt.signal);
        }
      }
    })().finally(() => {
      commitReady();
      kick();
    });
  };

  try {
    while (!halt.signal.aborted) {
      let drained = false;
      appended = false;
      while (window.length < o.concurrency && !halt.signal.aborted) {
        // Read before popping: input that was done before an empty pop has nothing more to add.
        const wasDone = input.done();
        // The records after the newest run in the window (from the head when the window is empty).
        let fresh: PoppedRun | undefined;
        try {
          fresh = await spool.popRun(o.batch, maxBytes, window.at(-1)?.run);
        } catch (err) {
          if (!isFerryError(err) || err.code === 'ERR_CLOSED') throw err;
          // Damage the head stepped past: its records are lost. Reported, counted, and the rest goes on.
          counts.lastError = describe(err);
          counts.damaged++;
          noteDamage(err);
          continue;
        }
        if (!fresh) {
          drained = wasDone;
          break;
        }
        launch(fresh);
      }
      if (window.length === 0 && drained) return;
      // Input that ended after this loop's pops read it (its wake-up may have
      // come while nothing waited) is looked at again, not waited for.
      const endedSince = !drained && input.done();
      if (halt.signal.aborted) break;
      // Wait for a delivery to finish, or (with room in the window) for an
      // append. A plain promise per wait: an AbortController per wait (one
      // per delivery) cost more than the commit. One wait on the spool at a
      // time, kept across loops until an append (or the end) settles it.
      const woken = new Promise<void>((r) => (kick = r));
      const room = window.length < o.concurrency;
      // The intake may finish without appending anything: look again now and
      // then. A full window needs no timer: a delivery always ends (accepted,
      // or its retry wait cut short by a halt) and wakes this loop.
      const timer = room && !endedSince ? setTimeout(() => kick(), idlePollMs) : undefined;
      if (room && !appendWait) {
        appendWait = spool.signal({ signal: ended.signal }).then(
          () => {
            appendWait = undefined;
            appended = true;
            kick();
          },
          () => {},
        );
      }
      // An append that landed since this loop began popping is not waited for.
      if (!room || (!appended && !endedSince)) await woken;
      clearTimeout(timer);
      kick = () => {};
    }
  } finally {
    // Stopping (or failing): cut retry waits short, let deliveries under way finish, commit the accepted prefix.
    halt.abort();
    ended.abort();
    stop.removeEventListener('abort', onStop);
    await Promise.allSettled(window.map((f) => f.done));
    commitReady();
    await Promise.all(commits);
  }
}
