/**
 * The `Delivery` a handler receives: its message's fields, the payload as
 * the codec decoded it, and the delivery's ID, group and attempt.
 */
import type { Delivery, StoredMessage } from './types.js';

/**
 * Builds the delivery of `m` with `payload` in place of its bytes. Field by
 * field, optional ones only when the message has them (as the engine and
 * every store builds a message): on Node 20, an object spread followed by
 * new fields (`{ ...message, deliveryId }`) took about 5 µs per object, this
 * about 0.2 µs, and a consumer makes one per delivery.
 */
export function deliveryOf(m: StoredMessage, payload: unknown, deliveryId: string, group: string, attempt: number): Delivery<unknown> {
  const d: Delivery<unknown> = { id: m.id, topic: m.topic, payload, publishedAt: m.publishedAt, deliveryId, group, attempt };
  if (m.key !== undefined) d.key = m.key;
  if (m.headers !== undefined) d.headers = m.headers;
  if (m.deliverAt !== undefined) d.deliverAt = m.deliverAt;
  if (m.priority !== undefined) d.priority = m.priority;
  return d;
}
