-- Completes deliveries $1 held under tokens $2; returns the ones still held.
-- Acking a keyed delivery promotes the next of its lane, so its topic is
-- notified on channel $3 (in this transaction: heard once it commits).
WITH done AS (
  UPDATE __SCHEMA__.deliveries d
  SET state = 2, finished_at = (SELECT clock_timestamp()), claim_token = NULL, holder = NULL, lease_until = NULL
  FROM unnest($1::text[], $2::uuid[]) AS t(id, token)
  WHERE d.delivery_id = t.id AND d.claim_token = t.token AND d.state = 1
  RETURNING d.delivery_id, t.token::text AS token, d.topic, d.msg_key
)
SELECT delivery_id, token,
       (SELECT count(pg_notify($3, w.topic)) FROM (SELECT DISTINCT topic FROM done WHERE msg_key IS NOT NULL) w) AS woke
FROM done
