/**
 * Name, identifier and time limits. Topic and group names become index
 * columns and lock keys, so they are short and plain; message IDs and keys
 * are caller data stored in indexed columns, so they are bounded too; and a
 * message's times lie in the years every store can hold.
 */
import { InvalidNameError, InvalidArgumentError } from '../errors.js';
import { shown } from '../show-value.js';
import { MAX_MESSAGE_TIME, MIN_MESSAGE_TIME } from './types.js';

/** Longest topic or group name, in characters. Bifrost's `MaxNameLength`. */
export const MAX_NAME_LENGTH = 200;

/** Longest caller-supplied message ID or key, in UTF-16 code units. Bifrost's `MaxIDLength`. */
export const MAX_ID_LENGTH = 255;

/**
 * Most bytes a message's headers may take, names and values in UTF-8
 * (64 KiB). The NATS queue carries less (4 KiB). Headers travel with every
 * delivery, dead-letter copy and redrive, so without a bound they would
 * slip past `maxPayloadBytes`.
 */
export const MAX_HEADER_BYTES = 65_536;

const NAME_RE = /^[A-Za-z0-9._-]+$/;

/**
 * Checks a topic or group name: 1 to `MAX_NAME_LENGTH` characters from
 * `[A-Za-z0-9._-]`. `kind` ("topic", "group", …) goes into the message.
 * Throws `InvalidNameError`. Bifrost's `ValidateName`.
 */
export function validateName(kind: string, name: string): void {
  if (typeof name !== 'string') {
    throw new InvalidNameError(`${kind} name must be a string, not ${name === null ? 'null' : typeof name}`);
  }
  if (name.length === 0) throw new InvalidNameError(`${kind} name is empty`);
  if (name.length > MAX_NAME_LENGTH) {
    throw new InvalidNameError(`${kind} name is ${name.length} characters, more than ${MAX_NAME_LENGTH}`);
  }
  if (!NAME_RE.test(name)) {
    throw new InvalidNameError(`${kind} name ${JSON.stringify(name)} has characters outside [A-Za-z0-9._-]`);
  }
}

/**
 * Checks a message ID or key: a non-empty, well-formed string (no lone UTF-16
 * surrogate, which every store would turn into U+FFFD and so merge two
 * distinct IDs or key lanes into one; no NUL, which Postgres text refuses) of
 * at most `MAX_ID_LENGTH` code units.
 *
 * @throws InvalidArgumentError the value breaks one of those rules.
 */
export function validateId(kind: string, value: string): void {
  if (typeof value !== 'string') throw new InvalidArgumentError(`message ${kind} must be a string, not ${value === null ? 'null' : typeof value}`);
  if (value.length === 0) throw new InvalidArgumentError(`message ${kind} is empty`);
  if (value.length > MAX_ID_LENGTH) {
    throw new InvalidArgumentError(`message ${kind} is ${value.length} characters, more than ${MAX_ID_LENGTH}`);
  }
  if (!isWellFormed(value)) throw new InvalidArgumentError(`message ${kind} ${JSON.stringify(value)} has a lone UTF-16 surrogate`);
  if (value.includes('\u0000')) throw new InvalidArgumentError(`message ${kind} ${JSON.stringify(value)} contains NUL`);
}

/** `String.prototype.isWellFormed`, which Node 20 has but TypeScript's ES2023 lib does not declare. */
function isWellFormed(s: string): boolean {
  return (s as unknown as { isWellFormed(): boolean }).isWellFormed();
}

/**
 * Checks a message's `publishedAt` or `deliverAt` (`field` words the error):
 * a valid Date from `MIN_MESSAGE_TIME` to `MAX_MESSAGE_TIME`. Returns its
 * time in ms. Throws `InvalidArgumentError`.
 */
export function validateMessageTime(field: 'publishedAt' | 'deliverAt', d: unknown): number {
  const t = d instanceof Date ? d.getTime() : NaN;
  if (Number.isNaN(t)) throw new InvalidArgumentError(`${field} must be a valid Date`);
  if (t < MIN_MESSAGE_TIME || t > MAX_MESSAGE_TIME) {
    throw new InvalidArgumentError(`${field} must lie in the years 1 to 9999, got ${shown(d)}`);
  }
  return t;
}
