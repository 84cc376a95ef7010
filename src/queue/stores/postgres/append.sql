-- Stores messages and fans them out, in one statement, when the caller knows
-- the topics' groups. Messages: $1 ids, $2 topics, $3 keys, $5 headers (JSON
-- text), $6 publish times, $7 deliver-at times, $15 priorities, in publish
-- order; their payloads are $4, all of them end to end, cut at byte offsets
-- $13 into lengths $14 (one binary parameter travels far cheaper than an
-- array of bytea, which goes as hex text). Deliveries: $8 message ids, $9
-- groups, $10 delivery ids (each takes its message's priority), made for
-- the groups the caller read at groups_version $17 of topics $16 (every
-- topic of the messages, distinct). $11 topics to notify on channel $12.
-- A message ID that exists already inserts nothing and fans out nothing.
--
-- First it locks the topics' rows, in topic order like lock-topics.sql (so
-- appends on a topic commit in seq order, and never deadlock). A row lock
-- returns the row's newest committed version, so a group registered or
-- removed while this waited shows as a changed version (migration 8's
-- trigger) even though this statement's snapshot predates it. Unless every
-- topic's row exists at the caller's version, nothing is stored and `ok` is
-- false: the caller reads the groups again under lock-topics and calls this
-- again in that transaction. The one-time filter on `stored` runs the lock
-- before any row (and any seq) is made.
WITH locked AS (
  SELECT t.topic, t.groups_version
  FROM __SCHEMA__.topics t
  WHERE t.topic = ANY($16::text[])
  ORDER BY t.topic
  FOR UPDATE
),
current AS (
  SELECT count(*) = cardinality($16::text[]) AS ok
  FROM locked l
  JOIN unnest($16::text[], $17::bigint[]) AS v(topic, version) ON v.topic = l.topic AND v.version = l.groups_version
),
input AS (
  SELECT *
  FROM unnest($1::text[], $2::text[], $3::text[], $13::int[], $14::int[], $5::text[], $6::timestamptz[], $7::timestamptz[], $15::int[])
    WITH ORDINALITY AS i(id, topic, msg_key, payload_at, payload_len, headers, published_at, deliver_at, priority, ord)
),
stored AS (
  INSERT INTO __SCHEMA__.messages (id, topic, msg_key, payload, headers, published_at, deliver_at, due_at, priority)
  SELECT id, topic, msg_key, substring($4::bytea FROM payload_at + 1 FOR payload_len), headers, published_at, deliver_at,
         coalesce(deliver_at, published_at), priority
  FROM input
  WHERE (SELECT ok FROM current)
  ORDER BY ord
  ON CONFLICT (id) DO NOTHING
  RETURNING seq, id, topic, msg_key, deliver_at, priority
),
-- The deliveries. A keyed one is flagged `blocked` (migration 9) when an
-- earlier row of its lane (topic, group, key) is in this batch, and that
-- row, the one just ahead of it, is marked `blocks_next`: both commit
-- together, so the removal that frees the flagged row comes after this
-- commit and clears its flag. A lane's first row in the batch is left
-- unflagged even when the lane has live rows already: flagging it would
-- need a mark on the live row ahead of it, which may be leaving the lane as
-- this runs. Unflagged rows behind a head cost a claim a probe each, never
-- order. A backlog published key by key in batches is flagged all but its
-- lanes' first rows; one published round-robin over its keys (a row per
-- key in each batch), or a message at a time, is not flagged at all.
--
-- A plain insert, without ON CONFLICT (whose extra probe of the key and
-- speculative insertion cost about 8% of the server's CPU per published
-- message): a delivery ID is derived from its message's ID and its group,
-- the caller fans each ID out once per group, and only for messages this
-- statement stored, which no delivery can name yet. A delivery never
-- outlives its message (the janitor deletes only messages without one), so
-- a message ID published again after a purge finds no delivery either.
fanned AS (
  INSERT INTO __SCHEMA__.deliveries (delivery_id, message_seq, topic, grp, msg_key, state, available_at, priority, blocked, blocks_next)
  SELECT f.delivery_id, s.seq, s.topic, f.grp, s.msg_key, 0 /* pending */, coalesce(s.deliver_at, '-infinity'), s.priority,
         s.msg_key IS NOT NULL AND row_number() OVER lane > 1,
         s.msg_key IS NOT NULL AND row_number() OVER lane < count(*) OVER lane
  FROM unnest($8::text[], $9::text[], $10::text[]) AS f(message_id, grp, delivery_id)
  JOIN stored s ON s.id = f.message_id
  WINDOW lane AS (PARTITION BY s.topic, f.grp, s.msg_key ORDER BY s.seq ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
  ORDER BY s.seq
)
-- pg_notify inside the transaction: listeners hear it only once it commits.
SELECT (SELECT ok FROM current) AS ok,
       (SELECT count(pg_notify($12, t.topic))::int FROM (SELECT DISTINCT topic FROM stored WHERE topic = ANY($11::text[])) t) AS woke
