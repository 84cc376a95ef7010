/**
 * The copy of a dead delivery published to a dead-letter topic: the original
 * message with six headers saying where it came from and why it died. Its ID
 * is the dead delivery's ID, so publishing the copy again (after a failed
 * kill, or a crash) stores nothing new.
 */
import type { Claimed, StoredMessage } from './types.js';

/** Header: the topic the dead delivery was consumed from. Bifrost's `HeaderDeadLetterSourceTopic`. */
export const HEADER_DLQ_SOURCE_TOPIC = 'x-queue-dlq-source-topic';
/** Header: the consumer group it died in. Bifrost's `HeaderDeadLetterGroup`. */
export const HEADER_DLQ_GROUP = 'x-queue-dlq-group';
/** Header: the dead delivery's ID. Bifrost's `HeaderDeadLetterDeliveryID`. */
export const HEADER_DLQ_DELIVERY_ID = 'x-queue-dlq-delivery-id';
/** Header: the original message's ID. Bifrost's `HeaderDeadLetterMessageID`. */
export const HEADER_DLQ_MESSAGE_ID = 'x-queue-dlq-message-id';
/** Header: attempts that ran (handler invocations, counting ones whose lease was lost), in decimal. Bifrost's `HeaderDeadLetterAttempts`. */
export const HEADER_DLQ_ATTEMPTS = 'x-queue-dlq-attempts';
/** Header: the last error's text, at most `MAX_ERROR_BYTES` of UTF-8. Bifrost's `HeaderDeadLetterError`. */
export const HEADER_DLQ_ERROR = 'x-queue-dlq-error';

/** Longest error text kept (in the store and in the dead-letter header), in UTF-8 bytes. */
export const MAX_ERROR_BYTES = 1024;

/**
 * Cuts `text` to at most `maxBytes` bytes of UTF-8 without splitting a
 * character: a cut that would land inside a multi-byte sequence moves back to
 * the start of that sequence.
 */
export function truncateUtf8(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return text;
  let end = maxBytes;
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--; // bytes[end] continues a character
  return bytes.subarray(0, end).toString('utf8');
}

/** The text recorded for a failure: an Error's message, otherwise `String(value)`, capped. */
export function errorText(err: unknown): string {
  let s: string;
  if (err instanceof Error) s = err.message || err.name;
  else {
    try {
      s = String(err);
    } catch {
      s = Object.prototype.toString.call(err);
    }
  }
  // Postgres text cannot hold NUL: an error echoing binary input would make
  // the retry or kill that records it fail, so NUL is written as U+FFFD.
  return truncateUtf8(s.includes('\0') ? s.replaceAll('\0', '\uFFFD') : s, MAX_ERROR_BYTES);
}

/**
 * Builds the dead-letter copy of `c` for `topic`. `attempts` is the number of
 * attempts that ran: `c.attempt`, or one less when `c` was claimed only to be
 * dead-lettered because its earlier leases were lost.
 */
export function deadLetterCopy(c: Claimed, topic: string, lastError: string, attempts = c.attempt): StoredMessage {
  const m = c.message;
  const copy: StoredMessage = {
    id: c.deliveryId,
    topic,
    payload: m.payload,
    publishedAt: new Date(),
    headers: {
      ...m.headers,
      [HEADER_DLQ_SOURCE_TOPIC]: m.topic,
      [HEADER_DLQ_GROUP]: c.group,
      [HEADER_DLQ_DELIVERY_ID]: c.deliveryId,
      [HEADER_DLQ_MESSAGE_ID]: m.id,
      [HEADER_DLQ_ATTEMPTS]: String(attempts),
      [HEADER_DLQ_ERROR]: truncateUtf8(lastError, MAX_ERROR_BYTES),
    },
  };
  if (m.key !== undefined) copy.key = m.key;
  return copy;
}
