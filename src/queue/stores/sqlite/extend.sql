-- Renews the lease of the delivery of message @id to group @grp, leased
-- under claim token @token, until @leaseUntil: a heartbeat. Fenced as ack.sql.
UPDATE ferry_deliveries SET lease_until = @leaseUntil
WHERE message_seq = (SELECT seq FROM ferry_messages WHERE id = @id) AND grp = @grp AND claim_token = @token AND state = 1 /* leased */
