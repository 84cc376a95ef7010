-- Acks the delivery of message @id to group @grp, finished at @now, if it is
-- still leased under claim token @token: a stale claim (its lease lost, the
-- delivery claimed again) changes nothing. The row stays until the janitor
-- purges its message (finished-messages.sql).
--
-- Every write after a claim is fenced so (retry, kill, extend, release too).
-- The row is found through its message's ID, as deliveries are keyed by
-- (message_seq, grp). Returns the row's topic and key, one row when it acked:
-- the store then moves a key's lane on (unblock-lane.sql).
UPDATE ferry_deliveries
SET state = 2 /* acked */, finished_at = @now, claim_token = NULL, holder = NULL, lease_until = NULL
WHERE message_seq = (SELECT seq FROM ferry_messages WHERE id = @id) AND grp = @grp AND claim_token = @token AND state = 1 /* leased */
RETURNING topic, msg_key
