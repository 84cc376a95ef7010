-- The poll query (Store.duePairs): which of the (topic, group) pairs $1
-- (topics) and $2 (groups, same positions) have a delivery a claim would take
-- now, by the database clock. One statement for every subscription of a
-- process, so idle subscriptions cost one query per poll interval between
-- them, not a claim each.
--
-- Due as in claim.sql: pending past its available_at, or leased with an
-- expired lease, and the head of its key lane (nothing earlier with its key
-- is live, nothing else with its key is leased). A paused group's pair is
-- left out (its flag read through the groups primary key, once per pair).
-- maxInFlight and rate limits are not looked at: a pair at its cap is
-- reported and its claim finds nothing.
--
-- Each pair is probed on its own, through the indexes a claim uses
-- (deliveries_pending for unkeyed rows, deliveries_lane for keyed ones,
-- deliveries_leased): a LATERAL
-- subquery with a LIMIT is never flattened into a join or hashed, so every
-- plan, PostgreSQL's generic plan for a prepared statement included (used
-- from its sixth run), is a loop over the pairs with an index probe each. A
-- single EXISTS let that generic plan join every pair with every due row of
-- the schema: 2,000 idle pairs beside 5,000 rows of an unrelated group went
-- from about 20 ms to 1.5 s per poll. Each probe is ordered as its index
-- is, so that a generic plan, which cannot see the pairs, never prefers a
-- sequential scan that a LIMIT 1 would stop early only for a busy group
-- (and that reads the whole table for an idle one). A pair's cost is the
-- rows of its own group the probe steps over (unkeyed ones scheduled for
-- later, lanes whose head is leased or scheduled), not the rows of other
-- groups.
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now),
pairs AS (
  SELECT DISTINCT topic, grp FROM unnest($1::text[], $2::text[]) AS p(topic, grp)
  WHERE NOT coalesce((SELECT g.paused FROM __SCHEMA__.groups g WHERE g.topic = p.topic AND g.grp = p.grp), false)
)
SELECT p.topic, p.grp AS "group"
FROM pairs p
CROSS JOIN LATERAL (
  (SELECT 1 FROM __SCHEMA__.deliveries d
   WHERE d.topic = p.topic AND d.grp = p.grp AND d.state = 0 /* pending */ AND d.msg_key IS NULL
     AND d.available_at <= (SELECT now FROM clock)
   ORDER BY d.priority DESC, d.message_seq
   LIMIT 1)
  UNION ALL
  -- Keyed: lane by lane as claim.sql walks them (one descent per lane to its
  -- head), stopping at the first head that is pending and due. Walking the
  -- keyed pending rows instead cost a step and a probe per row behind a
  -- leased head: 2.7 s a poll with 1,000 lanes of 50 published key by key.
  (WITH RECURSIVE lanes AS (
     (SELECT e.msg_key, e.state, e.available_at FROM __SCHEMA__.deliveries e
      WHERE e.topic = p.topic AND e.grp = p.grp AND e.state < 2 /* acked */ AND e.msg_key IS NOT NULL
      ORDER BY e.msg_key, e.message_seq
      LIMIT 1)
     UNION ALL
     SELECT n.msg_key, n.state, n.available_at
     FROM lanes l CROSS JOIN LATERAL (
       SELECT e.msg_key, e.state, e.available_at FROM __SCHEMA__.deliveries e
       WHERE e.topic = p.topic AND e.grp = p.grp AND e.state < 2 /* acked */ AND e.msg_key > l.msg_key
       ORDER BY e.msg_key, e.message_seq
       LIMIT 1) n
   )
   SELECT 1 FROM lanes h WHERE h.state = 0 /* pending */ AND h.available_at <= (SELECT now FROM clock)
   LIMIT 1)
  UNION ALL
  (SELECT 1 FROM __SCHEMA__.deliveries d
   WHERE d.topic = p.topic AND d.grp = p.grp AND d.state = 1 /* leased */ AND d.lease_until <= (SELECT now FROM clock)
     AND (d.msg_key IS NULL OR NOT EXISTS (
       SELECT 1 FROM __SCHEMA__.deliveries e
       WHERE e.topic = d.topic AND e.grp = d.grp AND e.msg_key = d.msg_key AND e.state < 2 /* acked */
         AND (e.message_seq < d.message_seq OR (e.state = 1 /* leased */ AND e.delivery_id <> d.delivery_id))))
   ORDER BY d.lease_until
   LIMIT 1)
  LIMIT 1
) due
