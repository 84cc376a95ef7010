-- The poll query (Store.duePairs): the (topic, group) pairs among topics
-- {topics} and groups {groups} with a pending delivery past its available_at
-- or a leased one whose lease ran out, by {now} (server milliseconds). The
-- caller keeps only the pairs it asked about. One statement for every
-- subscription of a process, so idle subscriptions cost one query per poll
-- interval between them, not a claim each. As in live-deliveries.sql, the
-- state test is applied after each delivery's latest version is taken. A
-- paused group's pairs are left out (its claims lease nothing). Key
-- lanes and maxInFlight are left to the claim: a pair whose due delivery waits
-- behind its lane's head is reported, and its claim finds nothing.
SELECT DISTINCT topic, grp FROM (
  SELECT topic, grp, delivery_id,
    argMax(state, ver) AS l_state, argMax(available_at, ver) AS l_available_at, argMax(lease_until, ver) AS l_lease_until
  FROM __DB__.deliveries
  WHERE topic IN {topics} AND grp IN {groups}
  GROUP BY topic, grp, delivery_id
) WHERE ((l_state = 0 AND l_available_at <= {now}) OR (l_state = 1 AND l_lease_until <= {now}))
  AND (topic, grp) NOT IN (
    SELECT topic, grp FROM (
      SELECT topic, grp, argMax(paused, ver) AS l_paused
      FROM __DB__.groups
      WHERE topic IN {topics} AND grp IN {groups}
      GROUP BY topic, grp
    ) WHERE l_paused = 1
  )
