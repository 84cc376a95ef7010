-- Gives deliveries $1 held under tokens $2 (pairwise) back without
-- spending an attempt; they are claimable at once, so their topics are
-- notified on channel $3. Index probes on the primary key, as in ack.sql.
WITH back AS (
  UPDATE __SCHEMA__.deliveries d
  SET state = 0 /* pending */, attempt = d.attempt - 1, claim_token = NULL, holder = NULL, lease_until = NULL
  WHERE d.delivery_id = ANY($1::text[]) AND d.state = 1 /* leased */
    AND EXISTS (SELECT 1 FROM unnest($1::text[], $2::uuid[]) AS t(id, token) WHERE t.id = d.delivery_id AND t.token = d.claim_token)
  RETURNING d.topic
)
SELECT count(pg_notify($3, w.topic))::int AS woke FROM (SELECT DISTINCT topic FROM back) w
