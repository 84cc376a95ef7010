-- The janitor role's current holder, its end (server clock) and version;
-- '', 0, 0 when nobody ever held it.
SELECT argMax(holder, ver) AS l_holder, argMax(until, ver) AS l_until, max(ver) AS l_ver
FROM __DB__.janitor WHERE name = 'janitor'
