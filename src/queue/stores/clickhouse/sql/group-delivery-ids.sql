-- The delivery IDs group {grp} on topic {topic} already has (left by a
-- registration that failed half-way), so a new attempt does not reset them.
SELECT delivery_id FROM __DB__.deliveries WHERE topic = {topic} AND grp = {grp} GROUP BY delivery_id
