-- Delivery versions; rows follow as VALUES tuples.
INSERT INTO __DB__.deliveries (topic, grp, delivery_id, message_id, seq, msg_key, state, attempt, available_at, lease_until, claim_token, holder, last_error, finished_at, ver) VALUES
