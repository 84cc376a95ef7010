-- Counts of group {grp} on topic {topic} at server time {now}: live
-- (pending or leased), leased under an unexpired lease, dead.
SELECT countIf(l_state < 2) AS live,
       countIf(l_state = 1 AND l_lease_until > {now}) AS leased,
       countIf(l_state = 3) AS dead
FROM (
  SELECT delivery_id, argMax(state, ver) AS l_state, argMax(lease_until, ver) AS l_lease_until
  FROM __DB__.deliveries
  WHERE topic = {topic} AND grp = {grp}
  GROUP BY delivery_id
)
