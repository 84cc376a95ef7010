-- The latest version of group {grp}'s registration on topic {topic}: one row
-- (with l_deleted = 1 once removed) when it was ever registered.
SELECT argMax(deleted, ver) AS l_deleted, max(ver) AS l_ver
FROM __DB__.groups WHERE topic = {topic} AND grp = {grp}
GROUP BY grp
