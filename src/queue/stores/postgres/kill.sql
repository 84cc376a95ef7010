-- Dead-letters the delivery of message $1 held under token $2 with error
-- $3; a keyed one promotes its lane's next, so its topic is notified on
-- channel $4. $5 is 1 when the claim ran nothing (taken past maxAttempts
-- only to be killed) and so is not counted as an attempt, else 0.
WITH dead AS (
  UPDATE __SCHEMA__.deliveries
  SET state = 3 /* dead */, finished_at = (SELECT clock_timestamp()), last_error = $3, lease_until = NULL, attempt = attempt - $5::int
  WHERE message_seq = $1::bigint AND claim_token = $2::uuid AND state = 1 /* leased */
  RETURNING topic, msg_key
)
SELECT (SELECT count(pg_notify($4, topic)) FROM dead WHERE msg_key IS NOT NULL) AS woke
FROM dead
