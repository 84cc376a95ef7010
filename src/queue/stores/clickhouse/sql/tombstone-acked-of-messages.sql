-- Purges the acked deliveries of messages {ids} on topic {topic} (a version
-- with state 4 each), ahead of the messages themselves.
INSERT INTO __DB__.deliveries (topic, grp, delivery_id, message_id, seq, msg_key, state, attempt, available_at, lease_until, claim_token, holder, last_error, finished_at, ver)
SELECT topic, grp, delivery_id, argMax(message_id, ver), argMax(seq, ver), argMax(msg_key, ver), 4,
       argMax(attempt, ver), argMax(available_at, ver), 0, argMax(claim_token, ver), argMax(holder, ver),
       argMax(last_error, ver), argMax(finished_at, ver), max(ver) + 1
FROM __DB__.deliveries
WHERE topic = {topic} AND message_id IN {ids}
GROUP BY topic, grp, delivery_id
HAVING argMax(state, ver) = 2
