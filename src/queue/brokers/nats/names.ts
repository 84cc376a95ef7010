/**
 * How topics and groups become JetStream names. Stream and consumer names
 * may hold letters, digits, `-` and `_` only, and a subject token no `.`, so
 * a ferry name (`[A-Za-z0-9._-]`) is escaped one-to-one: `_` becomes `__`
 * and `.` becomes `_d`. Topic `orders.eu` under prefix `FERRY` is stream
 * `FERRY_orders_deu` on subject `FERRY.orders_deu`; group `billing` is the
 * durable consumer `billing` of that stream.
 */
import { UnsupportedError } from '../../../errors.js';

/** Longest escaped name, characters: JetStream keeps each stream and consumer in a directory, and file names stop at 255 bytes. */
export const MAX_ESCAPED_LENGTH = 200;

/** Escapes a ferry topic or group name (already validated) into a JetStream name token. */
export function escapeName(name: string): string {
  return name.replaceAll('_', '__').replaceAll('.', '_d');
}

/** Reverses `escapeName`; undefined when `token` is not an escaped name. */
export function unescapeName(token: string): string | undefined {
  let out = '';
  for (let i = 0; i < token.length; i++) {
    const c = token[i]!;
    if (c !== '_') {
      out += c;
      continue;
    }
    const next = token[++i];
    if (next === '_') out += '_';
    else if (next === 'd') out += '.';
    else return undefined;
  }
  return out;
}

function escapedChecked(kind: string, name: string): string {
  const e = escapeName(name);
  if (e.length > MAX_ESCAPED_LENGTH) {
    throw new UnsupportedError(`${kind} name ${JSON.stringify(name)} escapes to ${e.length} characters for JetStream, more than ${MAX_ESCAPED_LENGTH} (stream and consumer names are directory names on the server)`);
  }
  return e;
}

/** The stream that holds `topic`. Throws `UnsupportedError` when the escaped name is too long. */
export function streamName(prefix: string, topic: string): string {
  return `${prefix}_${escapedChecked('topic', topic)}`;
}

/** The one subject of `topic`'s stream. */
export function subjectOf(prefix: string, topic: string): string {
  return `${prefix}.${escapedChecked('topic', topic)}`;
}

/** The durable consumer of `group`. Throws `UnsupportedError` when the escaped name is too long. */
export function durableName(group: string): string {
  return escapedChecked('group', group);
}

/** The topic of stream `stream` under `prefix`, or undefined when the stream is not one of ours. */
export function topicOfStream(prefix: string, stream: string): string | undefined {
  if (!stream.startsWith(`${prefix}_`)) return undefined;
  return unescapeName(stream.slice(prefix.length + 1));
}

/** The stream recording dead deliveries (one empty message each), which `stats` counts per group. */
export function deadLedgerStream(prefix: string): string {
  return `${prefix}-DEAD`;
}

/** The ledger subject of (`topic`, `group`): `<prefix>-dead.<topic>.<group>`, escaped; `<prefix>-dead.>` is the ledger stream's subject. */
export function deadLedgerSubject(prefix: string, topic: string, group: string): string {
  return `${prefix}-dead.${escapedChecked('topic', topic)}.${escapedChecked('group', group)}`;
}
