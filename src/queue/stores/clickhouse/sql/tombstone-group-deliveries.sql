-- Removes every delivery of group {grp} on topic {topic} whatever its state:
-- a version with state 4 for each one not purged yet. Its version is 3 past
-- the latest, above what a claim (+2) or fenced write (+1) that read the row
-- before may still write, so a lease held on it is lost.
INSERT INTO __DB__.deliveries (topic, grp, delivery_id, message_id, seq, msg_key, state, attempt, available_at, lease_until, claim_token, holder, last_error, finished_at, ver)
SELECT topic, grp, delivery_id, argMax(message_id, ver), argMax(seq, ver), argMax(msg_key, ver), 4,
       argMax(attempt, ver), argMax(available_at, ver), 0, argMax(claim_token, ver), argMax(holder, ver),
       argMax(last_error, ver), argMax(finished_at, ver), max(ver) + 3
FROM __DB__.deliveries
WHERE topic = {topic} AND grp = {grp}
GROUP BY topic, grp, delivery_id
HAVING argMax(state, ver) != 4
