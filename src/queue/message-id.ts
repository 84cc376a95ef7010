/**
 * Message IDs `publish` makes up when the caller gives none: version-7 UUIDs
 * (RFC 9562 §5.7), 48 bits of Unix milliseconds then 74 random bits. Being
 * time-ordered, they land at the end of a store's index on message IDs
 * instead of on a random page of it, so a publish dirties a page or two of
 * that index, not one per message.
 *
 * Random bits come from a pool filled by one `randomFillSync` and turned
 * into hex once per `POOL_IDS` IDs; each ID then slices that string, and the
 * time's hex is reused while the millisecond is unchanged.
 */
import { randomFillSync } from 'node:crypto';

const POOL_IDS = 512;
/** Hex digits per ID taken from the pool: 10 random bytes. */
const HEX_PER_ID = 20;
const pool = Buffer.alloc((HEX_PER_ID / 2) * POOL_IDS);
let hex = '';
let next = POOL_IDS;
let lastMs = -1;
let timeHex = '';
/** The RFC variant's two top bits are 10: the first hex digit of that group is 8, 9, a or b. */
const VARIANT = '89ab';

/** Two hex digits per byte value. */
const BYTE_HEX = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, '0'));

/**
 * The low 48 bits of the whole part of `ms` as 12 hex digits. Byte by byte
 * from two 24-bit halves: `toString(16)` of a number past 2^31 goes through
 * a floating-point remainder per digit.
 */
function hex48(ms: number): string {
  const whole = Math.floor(ms);
  const hi = Math.floor(whole / 0x1000000) % 0x1000000;
  const lo = whole % 0x1000000;
  return BYTE_HEX[hi >>> 16]! + BYTE_HEX[(hi >>> 8) & 255]! + BYTE_HEX[hi & 255]! + BYTE_HEX[lo >>> 16]! + BYTE_HEX[(lo >>> 8) & 255]! + BYTE_HEX[lo & 255]!;
}

/** A new version-7 UUID, lower-case, for `ms` (default now). */
export function uuidV7(ms: number = Date.now()): string {
  if (next === POOL_IDS) {
    randomFillSync(pool);
    hex = pool.toString('hex');
    next = 0;
  }
  const at = next++ * HEX_PER_ID;
  if (ms !== lastMs) {
    lastMs = ms;
    const t = hex48(ms);
    timeHex = `${t.slice(0, 8)}-${t.slice(8)}-7`;
  }
  // 12 random bits after the version digit, then the variant digit (2 random bits) and 62 more.
  // Hex digit at + 3 is the low half of the pool's byte (at + 3) >> 1.
  const variant = VARIANT[pool[(at + 3) >> 1]! & 3];
  return `${timeHex}${hex.slice(at, at + 3)}-${variant}${hex.slice(at + 4, at + 7)}-${hex.slice(at + 7, at + 19)}`;
}
