/**
 * The states a delivery row can be in, one list for every store. The memory
 * store keeps the names; the SQL stores keep the codes, small integers in a
 * `state` column. A code is written into databases, so it never changes
 * meaning: a new state takes a new code.
 *
 * The Postgres and SQLite `.sql` files write a code as the number followed
 * by a block comment holding the state's name (`state = 1`, then `leased`);
 * a test holds those names to the codes here. "Live" rows, pending or
 * leased, are those below acked (`state < 2`, then `acked`): the partial
 * indexes that keep claims fast test that.
 */

/** Waiting to be claimed: due at its `available_at` (a retry's backoff, a scheduled message). */
export const PENDING = 0;
/** Claimed under a lease: held until its `lease_until` by the claim token that took it. */
export const LEASED = 1;
/** Done: kept until the janitor purges its message (the Postgres store deletes the row and keeps only the time in `acks`). */
export const ACKED = 2;
/** Dead-lettered: kept until the janitor purges it. */
export const DEAD = 3;
/**
 * Removed: the ClickHouse store only, whose rows are versions, so it deletes
 * a delivery by writing a newer version in this state.
 */
export const PURGED = 4;

/** The state of a delivery, by name (what the memory store holds). */
export type DeliveryState = 'pending' | 'leased' | 'acked' | 'dead';

/** The code each state is stored as, by name: what the `.sql` files' comments are checked against. */
export const STATE_CODES: Readonly<Record<DeliveryState | 'purged', number>> = {
  pending: PENDING,
  leased: LEASED,
  acked: ACKED,
  dead: DEAD,
  purged: PURGED,
};
