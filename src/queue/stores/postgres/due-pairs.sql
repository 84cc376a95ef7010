-- The poll query (Store.duePairs): which of the (topic, group) pairs $1
-- (topics) and $2 (groups, same positions) have a delivery a claim would take
-- now, by the database clock. One statement for every subscription of a
-- process, so idle subscriptions cost one query per poll interval between
-- them, not a claim each.
--
-- Due as in claim.sql: pending past its available_at, or leased with an
-- expired lease, and the head of its key lane (nothing earlier with its key
-- is live, nothing else with its key is leased). Each pair is a few probes of
-- the indexes a claim uses (deliveries_live, deliveries_leased,
-- deliveries_lane): its cost grows with the pairs asked about, not with the
-- rows of idle groups. maxInFlight is not looked at: a pair at its cap is
-- reported and its claim finds nothing.
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now),
pairs AS (SELECT DISTINCT topic, grp FROM unnest($1::text[], $2::text[]) AS p(topic, grp))
SELECT p.topic, p.grp AS "group"
FROM pairs p
WHERE EXISTS (
  SELECT 1 FROM __SCHEMA__.deliveries d
  WHERE d.topic = p.topic AND d.grp = p.grp AND d.state < 2
    AND ((d.state = 0 AND d.available_at <= (SELECT now FROM clock))
      OR (d.state = 1 AND d.lease_until <= (SELECT now FROM clock)))
    AND (d.msg_key IS NULL OR NOT EXISTS (
      SELECT 1 FROM __SCHEMA__.deliveries e
      WHERE e.topic = d.topic AND e.grp = d.grp AND e.msg_key = d.msg_key AND e.state < 2
        AND (e.message_seq < d.message_seq OR (e.state = 1 AND e.delivery_id <> d.delivery_id)))))
