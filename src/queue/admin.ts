/**
 * The engine's side of operating on groups: the optional Store SPI methods
 * `removeGroup`, `listGroups`, `listMessages` and `setGroupPaused` are looked
 * up here, and a per-(topic, group) lock orders a group's registration
 * (`subscribe`), its removal (`removeGroup`), pausing and resuming within one
 * queue, so a subscription is never left running on a group removed while
 * it was being registered, and of a pause and a resume the later call wins.
 */
import { UnsupportedError } from '../errors.js';
import type { Store } from './types.js';

type OptionalOp = 'removeGroup' | 'listGroups' | 'listMessages' | 'setGroupPaused';

/**
 * The store's `op`, bound to it.
 *
 * @throws UnsupportedError the store does not implement `op`.
 */
export function requireStoreOp<K extends OptionalOp>(store: Store, op: K): NonNullable<Store[K]> {
  const f = store[op];
  if (typeof f !== 'function') throw new UnsupportedError(`this queue's store does not implement ${op}`);
  return (f as (...args: unknown[]) => unknown).bind(store) as NonNullable<Store[K]>;
}

/** Runs tasks one at a time per key, in call order; tasks of different keys run at once. */
export class KeyedLock {
  readonly #tails = new Map<string, Promise<void>>();

  /** Runs `task` once every task queued before it under `key` has settled; settles as `task` does. */
  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const prev = this.#tails.get(key) ?? Promise.resolve();
    const result = prev.then(task);
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.#tails.set(key, tail);
    void tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key);
    });
    return result;
  }
}

/** The lock key of (topic, group); names cannot hold NUL. */
export const groupKey = (topic: string, group: string): string => `${topic}\u0000${group}`;

