-- Gives the deliveries of messages $1 held under tokens $2 (pairwise) back
-- without spending an attempt; they are claimable at once, so their topics
-- are notified on channel $3. Index probes on the primary key, as in ack.sql.
WITH back AS (
  UPDATE __SCHEMA__.deliveries d
  SET state = 0 /* pending */, attempt = d.attempt - 1, claim_token = NULL, holder = NULL, lease_until = NULL
  WHERE d.message_seq = ANY($1::bigint[]) AND d.state + 0 = 1 /* leased: see ack.sql */
    AND d.claim_token = ANY($2::uuid[]) /* pairwise: see ack.sql */
  RETURNING d.topic
)
SELECT count(pg_notify($3, w.topic))::int AS woke FROM (SELECT DISTINCT topic FROM back) w
