-- Leases up to $3 due deliveries of group $2 on topic $1 to runner $4 for $5
-- ms, in claim order: higher priority first, then publish order. Times come
-- from the database clock, read once. When $6 is true (a rate-limited
-- claim) the claim records how many it leased, at that reading, in
-- claim_starts (rate-window.sql counts them).
--
-- Nothing is leased while the group is paused: the flag is read in this
-- statement's own snapshot, so a pause committed before the claim began
-- holds it, whichever instance claims.
--
-- Due: pending and past its available_at, or leased with an expired lease.
-- A keyed delivery is due only at the head of its lane: the first live row
-- of its key in publish order, whatever the priorities behind it. Unkeyed
-- pending rows are read off deliveries_pending (free), keyed ones off
-- deliveries_pending_keyed, which leaves out rows flagged as waiting behind
-- their head (walk, walk_heads), or lane by lane off deliveries_lane when
-- too few of those are heads (lanes): a row waiting behind its head is
-- never taken. An expired lease's row is tested for headship with one
-- deliveries_lane step (ORDER BY ... LIMIT 1 stops at the head). A lane's
-- head competes by its own priority. Only heads are ever leased and no row is inserted ahead of a
-- lane's live rows, so a head has no leased row behind it. SKIP LOCKED lets
-- concurrent claimers pass each other's rows; a row another claimer leased
-- meanwhile is re-checked on its new version and dropped.
--
-- The limit is a plain parameter (the caller subtracts the group's leases
-- for maxInFlight, and its recent claims for a rate limit, first): a limit
-- the planner cannot see makes it cost the plan as if it read every live
-- row, which at a million pending rows turns on JIT compilation and costs
-- more than the claim itself.
--
-- A delivery whose lease expired (state 1) is claimed alone: the first
-- candidate alone when it is one, else the candidates before the first one,
-- in claim order (src/queue/stores/recovered.ts says why).
--
-- It runs alone in its own implicit transaction (one round trip), which the
-- clock CTE tells not to wait for the WAL flush at commit: a crash that
-- forgets a claim only makes its deliveries claimable again, and any later
-- synchronous commit (an ack of them included) flushes it first.
WITH RECURSIVE clock AS MATERIALIZED (
  SELECT clock_timestamp() AS now, set_config('synchronous_commit', 'off', true) AS relaxed,
         EXISTS (SELECT 1 FROM __SCHEMA__.groups g WHERE g.topic = $1 AND g.grp = $2 AND g.paused) AS paused
),
-- Unkeyed pending rows in claim order (deliveries_pending holds only them,
-- in that order: its first rows are read and the walk stops, no sort).
free AS (
  SELECT d.delivery_id, d.priority, d.message_seq, d.state, d.ctid AS row_at
  FROM __SCHEMA__.deliveries d
  WHERE d.topic = $1 AND d.grp = $2 AND d.state = 0 /* pending */ AND d.msg_key IS NULL
    AND d.available_at <= (SELECT now FROM clock)
    AND NOT (SELECT paused FROM clock)
  ORDER BY d.priority DESC, d.message_seq
  LIMIT $3
  FOR UPDATE OF d SKIP LOCKED
),
-- The head of every key lane (its first live row in publish order), one
-- index descent per lane through deliveries_lane: each step takes the first
-- entry past the previous lane's key, which is the next lane's head. The
-- cost is the number of lanes, not the rows waiting behind their heads.
lanes AS (
  (SELECT e.msg_key, e.delivery_id, e.state, e.available_at, e.priority, e.message_seq
   FROM __SCHEMA__.deliveries e
   WHERE e.topic = $1 AND e.grp = $2 AND e.state < 2 /* acked */ AND e.msg_key IS NOT NULL
     AND NOT (SELECT paused FROM clock)
   ORDER BY e.msg_key, e.message_seq
   LIMIT 1)
  UNION ALL
  SELECT n.msg_key, n.delivery_id, n.state, n.available_at, n.priority, n.message_seq
  FROM lanes l CROSS JOIN LATERAL (
    SELECT e.msg_key, e.delivery_id, e.state, e.available_at, e.priority, e.message_seq
    FROM __SCHEMA__.deliveries e
    WHERE e.topic = $1 AND e.grp = $2 AND e.state < 2 /* acked */ AND e.msg_key > l.msg_key
    ORDER BY e.msg_key, e.message_seq
    LIMIT 1) n
),
-- Heads that are pending and due, the first $3 in claim order (a lane's
-- head competes by its own priority), locked. A head another claimer leased
-- meanwhile is re-checked on its new version (state) and dropped; no row is
-- ever inserted ahead of a lane's live rows, so a head stays the head until
-- it is finished.
-- Keyed pending rows not flagged as waiting behind their lane's head
-- (deliveries_pending_keyed; migration 9), in claim order, at most
-- 2 × $3 + 256 of them, each tested for being its lane's head (the flag may
-- be missing, never wrong the other way): when that prefix of claim order
-- holds $3 heads, or is every such row, its heads are the first in claim
-- order. Otherwise (many unflagged rows behind their heads) the lane walk
-- above runs instead; it is not started when the walk sufficed.
walk AS MATERIALIZED (
  SELECT d.delivery_id, d.priority, d.message_seq, d.topic, d.grp, d.msg_key
  FROM __SCHEMA__.deliveries d
  WHERE d.topic = $1 AND d.grp = $2 AND d.state = 0 /* pending */ AND d.msg_key IS NOT NULL AND NOT d.blocked
    AND d.available_at <= (SELECT now FROM clock)
    AND NOT (SELECT paused FROM clock)
  ORDER BY d.priority DESC, d.message_seq
  LIMIT 2 * $3 + 256
),
-- Read in claim order until $3 heads are found (rows are pulled from walk
-- as needed, so a prefix of heads costs a probe each, no more).
walk_heads AS MATERIALIZED (
  SELECT d.delivery_id, d.priority, d.message_seq
  FROM walk d
  WHERE d.message_seq = (
      SELECT e.message_seq FROM __SCHEMA__.deliveries e
      WHERE e.topic = d.topic AND e.grp = d.grp AND e.msg_key = d.msg_key AND e.state < 2 /* acked */
      ORDER BY e.message_seq
      LIMIT 1)
  LIMIT $3
),
walked AS MATERIALIZED (
  SELECT CASE WHEN (SELECT count(*) FROM walk_heads) >= $3 THEN true
              ELSE (SELECT count(*) FROM walk) < 2 * $3 + 256 END AS enough
),
keyed AS (
  SELECT d.delivery_id, d.priority, d.message_seq, d.state, d.ctid AS row_at
  FROM __SCHEMA__.deliveries d
  WHERE d.message_seq = ANY(
      ARRAY(
        SELECT w.message_seq FROM walk_heads w
        WHERE (SELECT enough FROM walked))
      || ARRAY(
        SELECT h.message_seq FROM lanes h
        WHERE NOT (SELECT enough FROM walked) AND h.state = 0 /* pending */ AND h.available_at <= (SELECT now FROM clock)
        ORDER BY h.priority DESC, h.message_seq
        LIMIT $3))
    AND d.grp = $2 AND d.state = 0 /* pending */
  FOR UPDATE OF d SKIP LOCKED
),
pending AS (
  SELECT * FROM free
  UNION ALL
  SELECT * FROM keyed
),
expired AS (
  SELECT d.delivery_id, d.priority, d.message_seq, d.state, d.ctid AS row_at
  FROM __SCHEMA__.deliveries d
  WHERE d.topic = $1 AND d.grp = $2 AND d.state = 1 /* leased */ AND d.lease_until <= (SELECT now FROM clock)
    AND NOT (SELECT paused FROM clock)
    AND (d.msg_key IS NULL OR d.message_seq = (
      SELECT e.message_seq FROM __SCHEMA__.deliveries e
      WHERE e.topic = d.topic AND e.grp = d.grp AND e.msg_key = d.msg_key AND e.state < 2 /* acked */
      ORDER BY e.message_seq
      LIMIT 1))
  ORDER BY d.priority DESC, d.message_seq
  LIMIT $3
  FOR UPDATE OF d SKIP LOCKED
),
-- The first $3 of both, numbered in claim order.
candidates AS (
  SELECT c.delivery_id, c.state, c.row_at, row_number() OVER (ORDER BY c.priority DESC, c.message_seq) AS rank
  FROM (
    SELECT * FROM pending
    UNION ALL
    SELECT * FROM expired
    ORDER BY priority DESC, message_seq
    LIMIT $3
  ) c
),
picked AS (
  SELECT c.delivery_id, c.state, c.row_at
  FROM candidates c
  WHERE c.rank = 1
     OR c.rank < COALESCE((SELECT min(rank) FROM candidates WHERE state = 1 /* leased */), 9223372036854775807)
),
leased AS (
  UPDATE __SCHEMA__.deliveries d
  -- Only a head is leased, so a `blocked` flag still set on one (found by
  -- the lane walk, which does not read flags) is cleared here.
  SET state = 1 /* leased */, attempt = d.attempt + 1, claim_token = gen_random_uuid(), holder = $4, blocked = false,
      lease_until = (SELECT now FROM clock) + $5 * interval '1 millisecond'
  -- By the row versions the CTEs above locked (FOR UPDATE returns the
  -- version it locked, the newest, and nothing can change a locked row
  -- before this statement ends): a TID scan, where a probe of the primary
  -- key per row cost about a sixth of the claim. ANY(ARRAY(...)) rather
  -- than a join: the planner cannot know picked is small and would
  -- otherwise hash-join against the whole table.
  WHERE d.ctid = ANY(ARRAY(SELECT row_at FROM picked))
  RETURNING d.delivery_id, d.attempt, d.claim_token, d.priority, d.message_seq
),
-- A rate-limited claim's record (none when it leased nothing).
started AS (
  INSERT INTO __SCHEMA__.claim_starts (topic, grp, started_at, n)
  SELECT $1, $2, (SELECT now FROM clock), count(*)
  FROM leased
  HAVING $6::boolean AND count(*) > 0
)
-- The claim token goes out as "<message_seq>/<uuid>": the store's fenced
-- writes find the row by the seq (the key's first column) and are fenced by
-- the uuid (rows.ts).
-- Payloads go out as base64 (encode wraps its lines; the driver's decoder
-- skips the breaks), not as bytea's hex text: a third fewer bytes on the
-- wire, and decoding hex was the largest single cost of a claimed row in
-- the consumer (rows.ts).
SELECT l.delivery_id, l.attempt, l.message_seq || '/' || l.claim_token::text AS claim_token, l.priority,
       -- picked holds a recovered row only as its one row (the rule above), so
       -- one flag for the claim says it: read once, where a lookup per row in
       -- picked compared every pair (a join would be planned as a hash join)
       (SELECT coalesce(bool_or(p.state = 1 /* leased */), false) FROM picked p) AS recovered,
       m.id, m.topic, m.msg_key, encode(m.payload, 'base64') AS payload, m.headers, m.published_at, m.deliver_at
FROM leased l JOIN __SCHEMA__.messages m ON m.seq = l.message_seq
ORDER BY l.priority DESC, l.message_seq
