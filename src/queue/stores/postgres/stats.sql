-- Counts of group $2 on topic $1, from one snapshot and one clock reading.
WITH clock AS MATERIALIZED (
  SELECT clock_timestamp() AS now
)
SELECT
  (SELECT count(*)::int FROM __SCHEMA__.deliveries WHERE topic = $1 AND grp = $2 AND state < 2) AS live,
  (SELECT count(*)::int FROM __SCHEMA__.deliveries
     WHERE topic = $1 AND grp = $2 AND state = 1 AND lease_until > (SELECT now FROM clock)) AS leased,
  (SELECT count(*)::int FROM __SCHEMA__.deliveries WHERE topic = $1 AND grp = $2 AND state = 3) AS dead
