-- Gives deliveries $1 held under tokens $2 back without spending an attempt;
-- they are claimable at once, so their topics are notified on channel $3.
WITH back AS (
  UPDATE __SCHEMA__.deliveries d
  SET state = 0, attempt = d.attempt - 1, claim_token = NULL, holder = NULL, lease_until = NULL
  FROM unnest($1::text[], $2::uuid[]) AS t(id, token)
  WHERE d.delivery_id = t.id AND d.claim_token = t.token AND d.state = 1
  RETURNING d.topic
)
SELECT count(pg_notify($3, w.topic))::int AS woke FROM (SELECT DISTINCT topic FROM back) w
