/**
 * Row shapes of the ClickHouse store and their conversions: what the SELECTs
 * return (JSONEachRow; UInt64 arrives as a decimal string, text that may
 * hold any bytes as hex) and the VALUES tuples the INSERTs take.
 */
import type { StoredMessage } from '../../types.js';
import { decodeWtf8, fromHex } from './escape.js';
import type { SqlValue } from './escape.js';

// The delivery states, from the list every store shares (PURGED is this store's own).
export { ACKED, DEAD, LEASED, PENDING, PURGED } from '../delivery-state.js';

/** The latest version of one delivery. */
export interface DeliveryRow {
  topic: string;
  grp: string;
  deliveryId: string;
  messageId: string;
  seq: number;
  key: string | null;
  state: number;
  attempt: number;
  availableAt: number;
  leaseUntil: number;
  token: string;
  holder: string;
  lastError: string;
  finishedAt: number;
  ver: number;
}

/** A row of live-deliveries.sql or deliveries-by-id.sql. */
export interface DeliveryRecord {
  delivery_id: string;
  l_message_id: string;
  l_seq: string;
  l_key: string | null;
  l_state: number;
  l_attempt: number;
  l_available_at: string;
  l_lease_until: string;
  l_token: string;
  l_holder_hex: string;
  l_error_hex: string;
  l_finished_at: string;
  l_ver: string;
}

export function toDeliveryRow(topic: string, grp: string, r: DeliveryRecord): DeliveryRow {
  return {
    topic,
    grp,
    deliveryId: r.delivery_id,
    messageId: r.l_message_id,
    seq: Number(r.l_seq),
    key: r.l_key,
    state: Number(r.l_state),
    attempt: Number(r.l_attempt),
    availableAt: Number(r.l_available_at),
    leaseUntil: Number(r.l_lease_until),
    token: r.l_token,
    holder: decodeWtf8(fromHex(r.l_holder_hex)),
    lastError: decodeWtf8(fromHex(r.l_error_hex)),
    finishedAt: Number(r.l_finished_at),
    ver: Number(r.l_ver),
  };
}

/** The VALUES tuple of a delivery version, in insert-deliveries.sql's column order. */
export function deliveryValues(d: DeliveryRow): SqlValue[] {
  return [d.topic, d.grp, d.deliveryId, d.messageId, d.seq, d.key, d.state, d.attempt, d.availableAt, d.leaseUntil, d.token, d.holder, d.lastError, d.finishedAt, d.ver];
}

/** A row of messages-by-id.sql. */
export interface MessageRecord {
  id: string;
  l_seq: string;
  l_key: string | null;
  l_payload_hex: string;
  l_headers_hex: string | null;
  l_published_at: string;
  l_deliver_at: string | null;
}

export function toMessage(topic: string, r: MessageRecord): StoredMessage {
  const m: StoredMessage = { id: r.id, topic, payload: fromHex(r.l_payload_hex), publishedAt: new Date(Number(r.l_published_at)) };
  if (r.l_key !== null) m.key = r.l_key;
  if (r.l_headers_hex !== null) m.headers = JSON.parse(decodeWtf8(fromHex(r.l_headers_hex))) as Record<string, string>;
  if (r.l_deliver_at !== null) m.deliverAt = new Date(Number(r.l_deliver_at));
  return m;
}

/** The VALUES tuple of a new message, in insert-messages.sql's column order. */
export function messageValues(m: StoredMessage, seq: number, ver: number): SqlValue[] {
  const published = m.publishedAt.getTime();
  const deliverAt = m.deliverAt === undefined ? null : m.deliverAt.getTime();
  return [
    m.topic,
    m.id,
    seq,
    m.key ?? null,
    m.payload,
    m.headers === undefined ? null : JSON.stringify(m.headers),
    published,
    deliverAt,
    deliverAt ?? published,
    0,
    ver,
  ];
}
