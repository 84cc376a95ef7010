-- Store.ackAndClaim for a claim without maxInFlight or a rate limit: acks
-- the deliveries of messages $7 held under tokens $8 (pairwise, as ack.sql does, notifying
-- channel $9 when a keyed one frees its lane), then claims as claim.sql does
-- with $1 to $6 (its parts are claim.sql's, commented there), in one
-- statement: one round trip and one durable commit where ack then claim take
-- two round trips (and, on a key lane, a wake-up between them).
--
-- Every part of a statement reads the snapshot taken before it, so the claim
-- still sees the rows this statement deletes: the lane walk and the head
-- probes of expired leases skip them by ID (acked, read once), which makes
-- a lane the acks free claimable in this commit. The expired probe leaves
-- out every delivery being acked, so the DELETE and the UPDATE never meet on
-- one row (a stale ack's delivery whose lease also ran out is claimed by the
-- next claim instead). An acked row that had rows flagged behind it
-- (migration 9) moves its lane on here: its next row is claimable in this
-- statement and unflagged when not claimed (lane_next, unblocked).
--
-- The rows: first the claimed deliveries in claim order (kind 0, as
-- claim.sql returns them), then one row per completed ack (kind 1: its
-- delivery_id and the token that held it in claim_token). The commit is
-- synchronous: it carries acks.
WITH RECURSIVE clock AS MATERIALIZED (
  SELECT clock_timestamp() AS now,
         -- Tells the DELETE trigger (migrations 11, 12) that this statement
         -- clears the flags of the lanes its acks move on (lane_next).
         set_config('ferry.lanes_unblocked_at', statement_timestamp()::text, true) AS unblocks,
         EXISTS (SELECT 1 FROM __SCHEMA__.groups g WHERE g.topic = $1 AND g.grp = $2 AND g.paused) AS paused
),
done AS (
  DELETE FROM __SCHEMA__.deliveries d
  WHERE d.message_seq = ANY($7::bigint[]) AND d.state + 0 = 1 /* leased: see ack.sql */
    AND d.claim_token = ANY($8::uuid[]) /* pairwise: see ack.sql */
  RETURNING d.delivery_id, d.message_seq || '/' || d.claim_token::text AS token, d.topic, d.grp, d.msg_key, d.message_seq, d.blocks_next
),
-- When they finished, in runs of seqs, as ack.sql records them.
logged AS (
  INSERT INTO __SCHEMA__.acked_spans (first_seq, last_seq, finished_at)
  SELECT min(message_seq), max(message_seq), (SELECT now FROM clock)
  FROM (SELECT message_seq, count(*) FILTER (WHERE gap) OVER (ORDER BY message_seq) AS run
        FROM (SELECT message_seq, message_seq - lag(message_seq) OVER (ORDER BY message_seq) > 1000 AS gap FROM done) g) r
  GROUP BY run
),
acked AS MATERIALIZED (
  SELECT ARRAY(SELECT delivery_id FROM done) AS ids
),
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
lanes AS (
  (SELECT e.msg_key, e.delivery_id, e.state, e.available_at, e.priority, e.message_seq
   FROM __SCHEMA__.deliveries e
   WHERE e.topic = $1 AND e.grp = $2 AND e.state < 2 /* acked */ AND e.msg_key IS NOT NULL
        AND e.delivery_id <> ALL((SELECT ids FROM acked)::text[])
     AND NOT (SELECT paused FROM clock)
   ORDER BY e.msg_key, e.message_seq
   LIMIT 1)
  UNION ALL
  SELECT n.msg_key, n.delivery_id, n.state, n.available_at, n.priority, n.message_seq
  FROM lanes l CROSS JOIN LATERAL (
    SELECT e.msg_key, e.delivery_id, e.state, e.available_at, e.priority, e.message_seq
    FROM __SCHEMA__.deliveries e
    WHERE e.topic = $1 AND e.grp = $2 AND e.state < 2 /* acked */ AND e.msg_key > l.msg_key
      AND e.delivery_id <> ALL((SELECT ids FROM acked)::text[])
    ORDER BY e.msg_key, e.message_seq
    LIMIT 1) n
),
-- The next live row of each lane an acked row marked `blocks_next` leaves
-- (migration 9), in any topic and group: one lane probe per such lane. Its
-- `blocked` flag is cleared here (unblocked, below), which the trigger would
-- otherwise do after this statement with a probe of its own per lane
-- (migrations 11 and 12 tell it this statement did; a row committed behind
-- the acked one since this statement's snapshot was not flagged: append.sql
-- flags a row only behind an earlier row of its own batch).
lane_next AS MATERIALIZED (
  SELECT n.delivery_id, n.topic, n.grp, n.state, n.available_at, n.blocked, n.priority, n.message_seq
  FROM (SELECT DISTINCT topic, grp, msg_key FROM done WHERE blocks_next) l
  CROSS JOIN LATERAL (
    SELECT e.delivery_id, e.topic, e.grp, e.state, e.available_at, e.blocked, e.priority, e.message_seq
    FROM __SCHEMA__.deliveries e
    WHERE e.topic = l.topic AND e.grp = l.grp AND e.msg_key = l.msg_key AND e.state < 2 /* acked */
      AND e.delivery_id <> ALL((SELECT ids FROM acked)::text[])
    ORDER BY e.message_seq
    LIMIT 1) n
),
-- Those of this group that are pending and due: claimable in this
-- statement, flagged or not (they are not in walk when flagged).
freed AS MATERIALIZED (
  SELECT n.delivery_id, n.priority, n.message_seq
  FROM lane_next n
  WHERE n.topic = $1 AND n.grp = $2 AND n.state = 0 /* pending */ AND n.available_at <= (SELECT now FROM clock)
    AND NOT (SELECT paused FROM clock)
),
-- Keyed pending rows not flagged as waiting behind their lane's head
-- (deliveries_pending_keyed; migration 9), in claim order, at most
-- 2 × $3 + 256 of them, each tested for being its lane's head (the flag may
-- be missing, never wrong the other way): when that prefix of claim order
-- holds the heads looked for ($3 less the freed rows ahead of them), or is
-- every such row, its heads are the first in claim order. Otherwise (many
-- unflagged rows behind their heads) the lane walk above runs instead; it
-- is not started when the walk sufficed.
walk AS MATERIALIZED (
  SELECT d.delivery_id, d.priority, d.message_seq, d.topic, d.grp, d.msg_key
  FROM __SCHEMA__.deliveries d
  WHERE d.topic = $1 AND d.grp = $2 AND d.state = 0 /* pending */ AND d.msg_key IS NOT NULL AND NOT d.blocked
    AND d.available_at <= (SELECT now FROM clock)
    AND NOT (SELECT paused FROM clock)
  ORDER BY d.priority DESC, d.message_seq
  LIMIT 2 * $3 + 256
),
-- The freed rows ahead of the walk's first row in claim order, and so
-- ahead of every head it can find: they are among the $3 claimed, and the
-- walk looks for only as many heads as are left. A backlog published key by
-- key, acked a claim at a time, frees its lanes' next rows ahead of the
-- lanes not started yet, which are all the walk reads: there it stops at
-- once, where it probed $3 heads for the claim to drop.
ahead AS MATERIALIZED (
  SELECT count(*) AS n
  FROM freed f
  WHERE NOT EXISTS (
    SELECT 1 FROM (SELECT w.priority, w.message_seq FROM walk w LIMIT 1) w
    WHERE w.priority > f.priority OR (w.priority = f.priority AND w.message_seq <= f.message_seq))
),
-- Read in claim order until that many heads are found (rows are pulled
-- from walk as needed, so a prefix of heads costs a probe each, no more).
walk_heads AS MATERIALIZED (
  SELECT d.delivery_id, d.priority, d.message_seq
  FROM walk d
  WHERE d.message_seq = (
      SELECT e.message_seq FROM __SCHEMA__.deliveries e
      WHERE e.topic = d.topic AND e.grp = d.grp AND e.msg_key = d.msg_key AND e.state < 2 /* acked */
        AND e.delivery_id <> ALL((SELECT ids FROM acked)::text[])
      ORDER BY e.message_seq
      LIMIT 1)
  LIMIT greatest($3 - (SELECT n FROM ahead), 0)
),
walked AS MATERIALIZED (
  SELECT CASE WHEN (SELECT count(*) FROM walk_heads) >= $3 - (SELECT n FROM ahead) THEN true
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
        LIMIT $3)
      || ARRAY(SELECT message_seq FROM freed))
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
    -- (a token the store did not hand out is a NULL seq, which would make <> ALL unknown for every row)
    AND d.message_seq <> ALL(array_remove($7::bigint[], NULL))
    AND (d.msg_key IS NULL OR d.message_seq = (
      SELECT e.message_seq FROM __SCHEMA__.deliveries e
      WHERE e.topic = d.topic AND e.grp = d.grp AND e.msg_key = d.msg_key AND e.state < 2 /* acked */
        AND e.delivery_id <> ALL((SELECT ids FROM acked)::text[])
      ORDER BY e.message_seq
      LIMIT 1))
  ORDER BY d.priority DESC, d.message_seq
  LIMIT $3
  FOR UPDATE OF d SKIP LOCKED
),
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
  -- Only a head is leased: a flag still set (a row an ack in this statement
  -- freed) is cleared here, and unblocked below leaves the row alone.
  SET state = 1 /* leased */, attempt = d.attempt + 1, claim_token = gen_random_uuid(), holder = $4, blocked = false,
      lease_until = (SELECT now FROM clock) + $5 * interval '1 millisecond'
  -- By the locked row versions, as claim.sql says.
  WHERE d.ctid = ANY(ARRAY(SELECT row_at FROM picked))
  RETURNING d.delivery_id, d.attempt, d.claim_token, d.priority, d.message_seq
),
-- The rows lane_next found flagged, less those leased above (a lease
-- clears the flag): their lane's head left, so they lead now.
-- By ANY(ARRAY(...)) on the key's first column, then the pair (ack.sql).
unblocked AS (
  UPDATE __SCHEMA__.deliveries d SET blocked = false
  WHERE d.message_seq = ANY(ARRAY(SELECT n.message_seq FROM lane_next n WHERE n.blocked))
    AND (d.message_seq, d.grp) IN (SELECT n.message_seq, n.grp FROM lane_next n WHERE n.blocked)
    AND d.delivery_id <> ALL(ARRAY(SELECT p.delivery_id FROM picked p))
    AND d.blocked
),
started AS (
  INSERT INTO __SCHEMA__.claim_starts (topic, grp, started_at, n)
  SELECT $1, $2, (SELECT now FROM clock), count(*)
  FROM leased
  HAVING $6::boolean AND count(*) > 0
),
woke AS (
  SELECT count(pg_notify($9, w.topic)) AS n FROM (SELECT DISTINCT topic FROM done WHERE msg_key IS NOT NULL) w
)
-- Payloads as base64, as in claim.sql.
SELECT 0 AS kind, l.delivery_id, l.attempt, l.message_seq || '/' || l.claim_token::text AS claim_token, l.priority, l.message_seq,
       (SELECT coalesce(bool_or(p.state = 1 /* leased */), false) FROM picked p) AS recovered,
       m.id, m.topic, m.msg_key, encode(m.payload, 'base64') AS payload, m.headers, m.published_at, m.deliver_at, (SELECT n FROM woke) AS woke
FROM leased l JOIN __SCHEMA__.messages m ON m.seq = l.message_seq
UNION ALL
SELECT 1, d.delivery_id, NULL, d.token, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, (SELECT n FROM woke)
FROM done d
ORDER BY kind, priority DESC, message_seq
