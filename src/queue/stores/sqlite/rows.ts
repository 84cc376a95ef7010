/**
 * Rows of the SQLite store's `ferry_messages` and claim walks, and the
 * `StoredMessage` a row holds.
 */
import type { StoredMessage } from '../../types.js';

/** A message row, as list-messages.sql and the claim walks read it. */
export interface MessageRowDb {
  seq: number;
  id: string;
  topic: string;
  msg_key: string | null;
  payload: Buffer;
  headers: string | null;
  published_at: number;
  deliver_at: number | null;
  priority: number;
}

/** A row of claimable.sql or claimable-by-priority.sql: a delivery a claim may take, with its message. */
export interface ClaimRowDb extends MessageRowDb {
  delivery_id: string;
  attempt: number;
  /** PENDING, or LEASED when its lease expired (the delivery is recovered). */
  state: number;
}

/** The message a row holds; `priority` only when not 0, as `publish` sets it. */
export function toMessage(r: MessageRowDb): StoredMessage {
  const m: StoredMessage = {
    id: r.id,
    topic: r.topic,
    payload: new Uint8Array(r.payload.buffer, r.payload.byteOffset, r.payload.byteLength),
    publishedAt: new Date(r.published_at),
  };
  if (r.msg_key !== null) m.key = r.msg_key;
  if (r.headers !== null) m.headers = JSON.parse(r.headers) as Record<string, string>;
  if (r.deliver_at !== null) m.deliverAt = new Date(r.deliver_at);
  if (r.priority !== 0) m.priority = r.priority;
  return m;
}
