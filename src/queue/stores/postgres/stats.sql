-- Counts of group $2 on topic $1, from one snapshot and one clock reading,
-- and how long (ms) the longest-waiting due delivery has been claimable: since
-- its due time or backoff end (the later of available_at and the message's
-- due_at), or since its lease expired; and whether the group is paused.
WITH clock AS MATERIALIZED (
  SELECT clock_timestamp() AS now
)
SELECT
  (SELECT count(*)::int FROM __SCHEMA__.deliveries WHERE topic = $1 AND grp = $2 AND state = 0 /* pending */)
    + (SELECT count(*)::int FROM __SCHEMA__.deliveries WHERE topic = $1 AND grp = $2 AND state = 1 /* leased */) AS live,
  (SELECT count(*)::int FROM __SCHEMA__.deliveries
     WHERE topic = $1 AND grp = $2 AND state = 1 /* leased */ AND lease_until > (SELECT now FROM clock)) AS leased,
  (SELECT count(*)::int FROM __SCHEMA__.deliveries WHERE topic = $1 AND grp = $2 AND state = 3 /* dead */) AS dead,
  (SELECT coalesce(floor(extract(epoch FROM (SELECT now FROM clock) - min(
       CASE WHEN d.state = 0 /* pending */ THEN greatest(d.available_at, m.due_at) ELSE d.lease_until END)) * 1000), 0)::float8
     FROM __SCHEMA__.deliveries d JOIN __SCHEMA__.messages m ON m.seq = d.message_seq
     WHERE d.topic = $1 AND d.grp = $2
       AND ((d.state = 0 /* pending */ AND d.available_at <= (SELECT now FROM clock) AND m.due_at <= (SELECT now FROM clock))
         OR (d.state = 1 /* leased */ AND d.lease_until <= (SELECT now FROM clock)))) AS oldest_ms,
  coalesce((SELECT paused FROM __SCHEMA__.groups WHERE topic = $1 AND grp = $2), false) AS paused
