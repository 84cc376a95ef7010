/**
 * Message IDs `publish` makes up when the caller gives none: version-7 UUIDs
 * (RFC 9562 §5.7), 48 bits of Unix milliseconds then 74 random bits. Being
 * time-ordered, they land at the end of a store's index on message IDs
 * instead of on a random page of it, so a publish dirties a page or two of
 * that index, not one per message.
 */
import { randomFillSync } from 'node:crypto';

const POOL_IDS = 256;
const pool = Buffer.alloc(10 * POOL_IDS);
let next = POOL_IDS;

/** A new version-7 UUID, lower-case, for `ms` (default now). */
export function uuidV7(ms: number = Date.now()): string {
  if (next === POOL_IDS) {
    randomFillSync(pool);
    next = 0;
  }
  const r = pool.subarray(next * 10, next * 10 + 10);
  next++;
  const t = Math.floor(ms).toString(16).padStart(12, '0').slice(-12);
  r[0] = (r[0]! & 0x0f) | 0x70; // version 7
  r[2] = (r[2]! & 0x3f) | 0x80; // RFC variant
  const h = r.toString('hex');
  return `${t.slice(0, 8)}-${t.slice(8)}-${h.slice(0, 4)}-${h.slice(4, 8)}-${h.slice(8)}`;
}
