-- Gives back the delivery of message @id to group @grp, leased under claim
-- token @token and never run (prefetched when its subscription closed):
-- pending again at once, and the claim's attempt not counted. Fenced as
-- ack.sql.
UPDATE ferry_deliveries
SET state = 0 /* pending */, attempt = attempt - 1, claim_token = NULL, holder = NULL, lease_until = NULL
WHERE message_seq = (SELECT seq FROM ferry_messages WHERE id = @id) AND grp = @grp AND claim_token = @token AND state = 1 /* leased */
