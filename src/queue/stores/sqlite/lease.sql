-- Leases the delivery of message @seq to group @grp, which the same
-- transaction found claimable (claimable.sql): to @holder under the new claim
-- token @token until @leaseUntil, one more attempt.
UPDATE ferry_deliveries
SET state = 1 /* leased */, attempt = attempt + 1, claim_token = @token, holder = @holder, lease_until = @leaseUntil
WHERE message_seq = @seq AND grp = @grp
