-- Deletes group $2 of topic $1, every delivery it has, whatever its state,
-- and its rate-limit records; returns whether the group row existed. Run
-- after lock-topics on $1 in the same transaction: no append can fan out
-- to the group between the two deletes, and an append that read the group
-- before commits first, so this statement sees (and deletes) its
-- deliveries. The deliveries are found through the topic's messages
-- (messages_topic, then the primary key): no index covers a group's
-- deliveries in every state.
WITH gone AS (
  DELETE FROM __SCHEMA__.groups WHERE topic = $1 AND grp = $2
  RETURNING 1
),
starts AS (
  DELETE FROM __SCHEMA__.claim_starts WHERE topic = $1 AND grp = $2
),
deliveries AS (
  DELETE FROM __SCHEMA__.deliveries d
  USING __SCHEMA__.messages m
  WHERE m.topic = $1 AND d.message_seq = m.seq AND d.grp = $2
  RETURNING 1
)
SELECT (SELECT count(*) FROM gone)::int AS groups, (SELECT count(*) FROM deliveries)::int AS deliveries
