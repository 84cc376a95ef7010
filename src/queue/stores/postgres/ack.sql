-- Completes the deliveries of messages $1 held under tokens $2 (pairwise;
-- rows.ts splits the store's claim tokens into the two): deletes their rows
-- and records when they finished in acked_spans (the janitor's retention
-- clock; migration 13). Returns the ones still held, with the claim token
-- that held them (a stale and a current claim of one delivery in the same
-- call are told apart). Acking a keyed delivery promotes the next of its lane, so its
-- topic is notified on channel $3 (in this transaction: heard once it
-- commits).
--
-- The ANY on the primary key's first column makes this a handful of index
-- probes however large the table (a probe finds the message's row in each
-- group; the token picks the one held). The token test is pairwise without
-- pairing the arrays: a token is a random UUID issued to one claim of one
-- delivery, so a row whose token is among $2 is held by the claim the
-- caller passed for it. (Testing
-- each row against the unnested pairs ran the unnest once per row: 10,000
-- pairs compared, about 2 ms, for an ack of 100.) The state is tested as
-- `state + 0` so that no plan can read deliveries_leased, whose predicate
-- `state = 1` alone matches: with some deliveries in flight the planner
-- would AND a read of that whole index (every lease of every group) with
-- the key probes, a cost that grows with the leases, not with the ack.
WITH done AS (
  DELETE FROM __SCHEMA__.deliveries d
  WHERE d.message_seq = ANY($1::bigint[]) AND d.state + 0 = 1 /* leased: see above */
    AND d.claim_token = ANY($2::uuid[]) /* pairwise: see above */
  RETURNING d.delivery_id, d.message_seq || '/' || d.claim_token::text AS token, d.topic, d.grp, d.msg_key, d.message_seq, d.blocks_next
),
-- One row per run of the acked seqs, a new run wherever the next seq is
-- more than 1,000 further on (migration 13 says why).
logged AS (
  INSERT INTO __SCHEMA__.acked_spans (first_seq, last_seq, finished_at)
  SELECT min(message_seq), max(message_seq), (SELECT clock_timestamp())
  FROM (SELECT message_seq, count(*) FILTER (WHERE gap) OVER (ORDER BY message_seq) AS run
        FROM (SELECT message_seq, message_seq - lag(message_seq) OVER (ORDER BY message_seq) > 1000 AS gap FROM done) g) r
  GROUP BY run
),
-- A row acked here that had rows flagged behind it (migration 9) moves its
-- lane on in this statement, as ack-and-claim.sql does: the next live row
-- of its lane loses its flag (one lane probe each), and the DELETE trigger
-- of such a row is told so (migrations 11, 12), which would otherwise run
-- the same probe after the statement. `acked` is read only when some row
-- here had rows flagged behind it; the trigger fires only for those.
acked AS MATERIALIZED (
  SELECT ARRAY(SELECT delivery_id FROM done) AS ids,
         set_config('ferry.lanes_unblocked_at', statement_timestamp()::text, true) AS marked
),
heads AS MATERIALIZED (
  SELECT n.message_seq, n.grp
  FROM (SELECT DISTINCT topic, grp, msg_key FROM done WHERE blocks_next) l
  CROSS JOIN LATERAL (
    SELECT e.message_seq, e.grp FROM __SCHEMA__.deliveries e
    WHERE e.topic = l.topic AND e.grp = l.grp AND e.msg_key = l.msg_key AND e.state < 2 /* acked */
      AND e.delivery_id <> ALL((SELECT ids FROM acked)::text[])
    ORDER BY e.message_seq
    LIMIT 1) n
),
-- By ANY(ARRAY(...)) on the key's first column, then the pair: a join could
-- be planned as a hash join over the whole table.
unblocked AS (
  UPDATE __SCHEMA__.deliveries d SET blocked = false
  WHERE d.blocked AND d.message_seq = ANY(ARRAY(SELECT message_seq FROM heads))
    AND (d.message_seq, d.grp) IN (SELECT message_seq, grp FROM heads)
)
SELECT delivery_id, token,
       (SELECT count(pg_notify($3, w.topic)) FROM (SELECT DISTINCT topic FROM done WHERE msg_key IS NOT NULL) w) AS woke
FROM done
