-- Renews the leases of deliveries $1 held under tokens $2 for $3 ms from now
-- (database clock); returns the ones still held.
UPDATE __SCHEMA__.deliveries d
SET lease_until = (SELECT clock_timestamp()) + $3 * interval '1 millisecond'
FROM unnest($1::text[], $2::uuid[]) AS t(id, token)
WHERE d.delivery_id = t.id AND d.claim_token = t.token AND d.state = 1
RETURNING d.delivery_id, t.token::text AS token
