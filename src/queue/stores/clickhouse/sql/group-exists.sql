-- The latest version of group {grp}'s registration on topic {topic}: one row
-- (with l_deleted = 1 once removed) when it was ever registered, with
-- whether it is paused and when it was registered.
SELECT argMax(deleted, ver) AS l_deleted, argMax(paused, ver) AS l_paused, argMax(created_at, ver) AS l_created_at, max(ver) AS l_ver
FROM __DB__.groups WHERE topic = {topic} AND grp = {grp}
GROUP BY grp
