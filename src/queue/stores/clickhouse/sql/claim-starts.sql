-- The recent claim starts of group {grp} on topic {topic} (see migration
-- 004): the latest version's starts and counts, and its version. No row
-- when the group never claimed under a rate limit.
SELECT argMax(starts, ver) AS l_starts, argMax(counts, ver) AS l_counts, max(ver) AS l_ver
FROM __DB__.claim_starts
WHERE topic = {topic} AND grp = {grp}
GROUP BY grp
