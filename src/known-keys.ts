/**
 * Refusing misspelt option keys. Each options interface gets one
 * `knownKeys<Interface>({ ... })` list beside it; the list's type is
 * `Record<keyof Interface, true>`, so a field added to the interface without
 * an entry here (or an entry for a field that does not exist) is a compile
 * error, and the runtime check cannot drift from the type.
 */
import { InvalidArgumentError } from './errors.js';

/** The keys of `T`, checked against `T` by the compiler. @internal */
export function knownKeys<T extends object>(keys: Record<keyof T, true>): readonly string[] {
  return Object.keys(keys);
}

/**
 * Throws `InvalidArgumentError` unless `value` is an object (or `undefined`)
 * whose own enumerable keys are all in `known`. `what` names the options in
 * the message, e.g. `subscribe option`. @internal
 */
export function rejectUnknownKeys(what: string, value: unknown, known: readonly string[]): void {
  if (value === undefined) return;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidArgumentError(`${what}s must be an object, got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}`);
  }
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) throw new InvalidArgumentError(`unknown ${what} ${JSON.stringify(key)} (known: ${known.join(', ')})`);
  }
}

/**
 * The key of `known` that `key` looks like a slip of, if any: the same
 * letters in another case, or one letter added, dropped or changed, or two
 * neighbours swapped (two such slips for names of 8 letters or more):
 * `fireSchedule`, `onerror`, `onErorr`, `loger`, `pol`. Used
 * where unknown keys must pass (an open bag of dependencies) but a misspelt
 * known one must not. @internal
 */
export function nearKey(key: string, known: readonly string[]): string | undefined {
  const k = key.toLowerCase();
  for (const name of known) {
    const n = name.toLowerCase();
    if (k === n || (Math.min(k.length, n.length) >= 3 && editDistanceAtMost(k, n, n.length >= 8 ? 2 : 1))) return name;
  }
  return undefined;
}

/** Whether `a` becomes `b` by at most `max` single-letter insertions, deletions, substitutions or swaps of two neighbours. */
function editDistanceAtMost(a: string, b: string, max: number): boolean {
  if (Math.abs(a.length - b.length) > max) return false;
  let before: number[] = [];
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) row[j] = Math.min(row[j]!, before[j - 2]! + 1);
    }
    before = prev;
    prev = row;
  }
  return prev[b.length]! <= max;
}
