-- Records failed attempt $4 of the delivery of message $1 held under token
-- $2 and makes it due again $3 ms from now (database clock). No row: not
-- held.
UPDATE __SCHEMA__.deliveries
SET state = 0 /* pending */, available_at = (SELECT clock_timestamp()) + $3 * interval '1 millisecond', last_error = $4,
    claim_token = NULL, holder = NULL, lease_until = NULL
WHERE message_seq = $1::bigint AND claim_token = $2::uuid AND state = 1 /* leased */
RETURNING delivery_id
