-- The deliveries group {grp} on topic {topic} already has: left by a
-- registration that failed half-way (kept, so a new attempt does not reset
-- them) or purged and tombstoned (state 4; a new delivery with that ID needs
-- a larger version than l_ver).
SELECT delivery_id, argMax(state, ver) AS l_state, max(ver) AS l_ver
FROM __DB__.deliveries WHERE topic = {topic} AND grp = {grp}
GROUP BY delivery_id
