-- Completes deliveries $1 held under tokens $2 (pairwise): deletes their rows
-- and records when each message's delivery finished in acks (the janitor's
-- retention clock). Returns the ones still held, with the token that held
-- them (a stale and a current claim of one delivery in the same call are
-- told apart). Acking a keyed delivery promotes the next of its lane, so its
-- topic is notified on channel $3 (in this transaction: heard once it
-- commits).
--
-- The ANY on the primary key makes this a handful of index probes however
-- large the table; the pairs are then checked against the unnested arrays.
WITH done AS (
  DELETE FROM __SCHEMA__.deliveries d
  WHERE d.delivery_id = ANY($1::text[]) AND d.state = 1 /* leased */
    AND EXISTS (SELECT 1 FROM unnest($1::text[], $2::uuid[]) AS t(id, token) WHERE t.id = d.delivery_id AND t.token = d.claim_token)
  RETURNING d.delivery_id, d.claim_token::text AS token, d.topic, d.msg_key, d.message_seq
),
logged AS (
  INSERT INTO __SCHEMA__.acks (message_seq, finished_at)
  SELECT message_seq, (SELECT clock_timestamp()) FROM done
)
SELECT delivery_id, token,
       (SELECT count(pg_notify($3, w.topic)) FROM (SELECT DISTINCT topic FROM done WHERE msg_key IS NOT NULL) w) AS woke
FROM done
