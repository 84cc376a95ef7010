/**
 * What this process knows of each JetStream delivery, shared by every nats
 * queue in it. JetStream does not fence acks: an ack sent under an ack wait
 * that already ran out still completes the message, even while the server
 * has handed it to another pull. So, per (stream, consumer, stream
 * sequence):
 *
 * - the newest delivery count seen: an attempt older than that is stale
 *   (its lease lapsed and the message was delivered again), so its outcome
 *   is discarded;
 * - the attempt running now: a newer attempt waits for it, so this process
 *   never runs one delivery twice at once;
 * - whether this process completed it lately: a delivery of a message this
 *   process already acked (the server sent it before our ack arrived) is
 *   acked again without running.
 */

/** How many completed deliveries are remembered (oldest forgotten first). */
const COMPLETED_REMEMBERED = 100_000;

const newest = new Map<string, number>();
const running = new Map<string, Promise<void>>();
const completed = new Set<string>();

/** The registry key of a delivery. */
export function attemptKey(stream: string, consumer: string, streamSeq: number): string {
  return `${stream}\u0000${consumer}\u0000${streamSeq}`;
}

/** Records that attempt `count` of `key` arrived; resolves once no earlier attempt of it runs in this process. */
export async function beginAttempt(key: string, count: number): Promise<() => void> {
  if (count > (newest.get(key) ?? 0)) newest.set(key, count);
  const earlier = running.get(key);
  let done!: () => void;
  const mine = new Promise<void>((resolve) => (done = resolve));
  running.set(key, mine);
  if (earlier) await earlier;
  return () => {
    if (running.get(key) === mine) {
      running.delete(key);
      // Nothing runs and nothing newer is known: forget the count (a message is delivered again only while unacked).
      if (newest.get(key) === count) newest.delete(key);
    }
    done();
  };
}

/** Whether a newer attempt of `key` than `count` has arrived in this process. */
export function superseded(key: string, count: number): boolean {
  return (newest.get(key) ?? 0) > count;
}

/** Records that `key` was acked by this process. */
export function markCompleted(key: string): void {
  completed.add(key);
  if (completed.size > COMPLETED_REMEMBERED) completed.delete(completed.values().next().value!);
}

/** Whether this process acked `key` lately. */
export function wasCompleted(key: string): boolean {
  return completed.has(key);
}
