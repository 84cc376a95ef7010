/**
 * Marking a failure as permanent: a handler throws `permanent(err)` to
 * dead-letter its delivery at once instead of retrying.
 */

const PERMANENT = Symbol.for('ferry.queue.permanent');

/** The error `permanent` wraps a failure in; `cause` is the original value. */
export class PermanentError extends Error {
  readonly [PERMANENT] = true;
  constructor(cause: unknown) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.name = 'PermanentError';
  }
}

/**
 * Wraps `err` so the delivery is dead-lettered without further retries.
 * `permanent(undefined)` and `permanent(null)` return `undefined`, and an
 * error already marked is returned as is. Bifrost's `Permanent`.
 */
export function permanent<E>(err: E): E extends null | undefined ? undefined : PermanentError;
export function permanent(err: unknown): PermanentError | undefined {
  if (err === undefined || err === null) return undefined;
  if (err instanceof PermanentError) return err;
  return new PermanentError(err);
}

/**
 * Whether `err`, or any error in its `cause` chain, was marked with
 * `permanent`. Bifrost's `IsPermanent`.
 */
export function isPermanent(err: unknown): boolean {
  const seen = new Set<unknown>();
  let cur: unknown = err;
  while (cur !== null && typeof cur === 'object' && !seen.has(cur)) {
    if ((cur as { [PERMANENT]?: unknown })[PERMANENT] === true) return true;
    seen.add(cur);
    cur = (cur as { cause?: unknown }).cause;
  }
  return false;
}
