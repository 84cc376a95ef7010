-- Puts the delivery of message @id to group @grp, leased under claim token
-- @token, back to pending: claimable again from @availableAt (its backoff's
-- end), with @error as its last error. Fenced as ack.sql.
UPDATE ferry_deliveries
SET state = 0 /* pending */, available_at = @availableAt, last_error = @error, claim_token = NULL, holder = NULL, lease_until = NULL
WHERE message_seq = (SELECT seq FROM ferry_messages WHERE id = @id) AND grp = @grp AND claim_token = @token AND state = 1 /* leased */
