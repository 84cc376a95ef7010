-- Dead-letters the delivery of message @id to group @grp, leased under claim
-- token @token: dead from @now with @error as its last error, kept until the
-- janitor purges it (purge-dead.sql). @unrun is 1 when the claim ran nothing
-- (it was taken only to dead-letter the delivery) and so is not counted as an
-- attempt, else 0. Fenced as ack.sql, and returns what ack.sql does.
UPDATE ferry_deliveries
SET state = 3 /* dead */, finished_at = @now, last_error = @error, claim_token = NULL, holder = NULL, lease_until = NULL,
  attempt = attempt - @unrun
WHERE message_seq = (SELECT seq FROM ferry_messages WHERE id = @id) AND grp = @grp AND claim_token = @token AND state = 1 /* leased */
RETURNING topic, msg_key
