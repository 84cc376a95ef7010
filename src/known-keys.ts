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
