/**
 * The rows the Postgres store's claim and fenced writes return, and how they
 * become the engine's values; and the store's claim tokens, which the fenced
 * writes split (sql.ts puts them in the order every multi-row update locks
 * deliveries in, so two instances never deadlock on each other's rows).
 */
import type { Claimed, StoredMessage } from '../../types.js';

/** A row of claim.sql (and the statements that claim like it). */
export interface ClaimRow {
  delivery_id: string;
  attempt: number;
  claim_token: string;
  /** Its message's priority (0 when published without one). */
  priority?: number;
  /** Its lease had expired: claimed alone (recovered.ts). */
  recovered: boolean;
  id: string;
  topic: string;
  msg_key: string | null;
  /** Base64 (claim.sql says why), line breaks and all. */
  payload: string;
  headers: string | null;
  published_at: Date;
  deliver_at: Date | null;
}

/** The bytes of a base64 payload, as a plain `Uint8Array` (a view of the buffer the decoder filled). */
function fromBase64(text: string): Uint8Array {
  const b = Buffer.from(text, 'base64');
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

export function toMessage(r: ClaimRow): StoredMessage {
  const m: StoredMessage = {
    id: r.id,
    topic: r.topic,
    payload: fromBase64(r.payload),
    publishedAt: r.published_at,
  };
  if (r.msg_key !== null) m.key = r.msg_key;
  if (r.headers !== null) m.headers = JSON.parse(r.headers) as Record<string, string>;
  if (r.deliver_at !== null) m.deliverAt = r.deliver_at;
  if (r.priority) m.priority = r.priority;
  return m;
}

/** The engine's `Claimed` of a claimed row of group `group`. */
export function toClaimed(r: ClaimRow, group: string): Claimed {
  const c: Claimed = { deliveryId: r.delivery_id, claimToken: r.claim_token, group, attempt: r.attempt, message: toMessage(r) };
  if (r.recovered) c.recovered = true;
  return c;
}

/**
 * This store's claim tokens: the message's seq and the claim's uuid,
 * "<seq>/<uuid>" (claim.sql). The seq finds the delivery's row through the
 * primary key (message_seq, grp); the uuid, made for one claim of one
 * delivery, fences the write.
 */
const CLAIM_TOKEN = /^([1-9][0-9]{0,18})\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

/** The seq and the uuid of a claim token of this store; undefined for any other string (a token it did not hand out). */
export function splitToken(token: string): [seq: string, uuid: string] | undefined {
  const m = CLAIM_TOKEN.exec(token);
  return m === null ? undefined : [m[1]!, m[2]!];
}


export interface HeldRow {
  delivery_id: string;
  token: string;
}

/** The IDs of `cs`, in their order, whose (delivery, token) pair the statement matched: a stale claim of a delivery held under a newer token is not held. */
export function stillHeld(cs: Claimed[], rows: HeldRow[]): string[] {
  const held = new Set(rows.map((r) => `${r.delivery_id} ${r.token}`));
  return cs.filter((c) => held.has(`${c.deliveryId} ${c.claimToken}`)).map((c) => c.deliveryId);
}
