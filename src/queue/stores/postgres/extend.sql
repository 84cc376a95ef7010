-- Renews the leases of the deliveries of messages $1 held under tokens $2
-- (pairwise) for $3 ms from now (database clock); returns the ones still
-- held, with their claim token. Index probes on the primary key, as in
-- ack.sql.
UPDATE __SCHEMA__.deliveries d
SET lease_until = (SELECT clock_timestamp()) + $3 * interval '1 millisecond'
WHERE d.message_seq = ANY($1::bigint[]) AND d.state + 0 = 1 /* leased: see ack.sql */
  AND d.claim_token = ANY($2::uuid[]) /* pairwise: see ack.sql */
RETURNING d.delivery_id, d.message_seq || '/' || d.claim_token::text AS token
