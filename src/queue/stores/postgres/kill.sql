-- Dead-letters delivery $1 held under token $2 with error $3; a keyed one
-- promotes its lane's next, so its topic is notified on channel $4.
WITH dead AS (
  UPDATE __SCHEMA__.deliveries
  SET state = 3, finished_at = (SELECT clock_timestamp()), last_error = $3, lease_until = NULL
  WHERE delivery_id = $1 AND claim_token = $2::uuid AND state = 1
  RETURNING topic, msg_key
)
SELECT (SELECT count(pg_notify($4, topic)) FROM dead WHERE msg_key IS NOT NULL) AS woke
FROM dead
