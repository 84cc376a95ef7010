-- What a claim of group $2 on topic $1 may still lease, read after
-- claim-lock-group in the same transaction (so from committed rows, and
-- nothing can be added before this transaction's claim commits), by the
-- database clock:
-- - in_flight: its unexpired leases, when $3 (maxInFlight) is above 0;
-- - started: the deliveries its claims started in the last $4 ms (the rate
--   limit's interval; null for none), from claim_starts, whose older rows
--   are deleted here. The claim reads the clock again after this one, so
--   its own window ends later and holds no more claims than this one
--   counted;
-- - room_in_ms: how long until the oldest of those claims leaves the
--   window (null when there is none), which gives room for at least one
--   more start.
WITH clock AS MATERIALIZED (
  SELECT clock_timestamp() AS now
),
pruned AS (
  DELETE FROM __SCHEMA__.claim_starts
  WHERE $4::int IS NOT NULL AND topic = $1 AND grp = $2
    AND started_at <= (SELECT now FROM clock) - $4::int * interval '1 millisecond'
),
recent AS (
  SELECT sum(n)::float8 AS started, min(started_at) AS oldest
  FROM __SCHEMA__.claim_starts
  WHERE $4::int IS NOT NULL AND topic = $1 AND grp = $2
    AND started_at > (SELECT now FROM clock) - $4::int * interval '1 millisecond'
)
SELECT
  (SELECT count(*)::int FROM __SCHEMA__.deliveries
     WHERE $3::bigint > 0 AND topic = $1 AND grp = $2 AND state = 1 /* leased */ AND lease_until > (SELECT now FROM clock)) AS in_flight,
  coalesce(r.started, 0) AS started,
  (extract(epoch FROM r.oldest + $4::int * interval '1 millisecond' - (SELECT now FROM clock)) * 1000)::float8 AS room_in_ms
FROM recent r
