-- The first version of a ferry queue schema. __SCHEMA__ is replaced by the
-- validated, quoted schema name before this file runs.

-- One row per topic ever published to or subscribed on. Appends and group
-- registrations lock their topics' rows, so a group created with `earliest`
-- never misses a message committed while it was being created, and message
-- sequence numbers on a topic are handed out in commit order.
CREATE TABLE __SCHEMA__.topics (
  topic text PRIMARY KEY
);

-- Consumer groups. A claim with maxInFlight locks its group's row, which
-- serialises the in-flight count of that group across every instance.
CREATE TABLE __SCHEMA__.groups (
  topic text NOT NULL,
  grp text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (topic, grp)
);

-- Messages; seq is publish order.
CREATE TABLE __SCHEMA__.messages (
  seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  id text NOT NULL UNIQUE,
  topic text NOT NULL,
  msg_key text,
  payload bytea NOT NULL,
  headers text,
  published_at timestamptz NOT NULL,
  deliver_at timestamptz,
  -- deliver_at when scheduled, else published_at: where acked retention starts.
  due_at timestamptz NOT NULL
);
CREATE INDEX messages_topic ON __SCHEMA__.messages (topic, seq);
CREATE INDEX messages_due ON __SCHEMA__.messages (due_at);

-- One row per (message, group). state: 0 pending, 1 leased, 2 acked, 3 dead
-- (src/queue/stores/delivery-state.ts).
-- The cascade removes a message's deliveries with it, including one a
-- concurrent backfill inserted after the purge chose the message.
CREATE TABLE __SCHEMA__.deliveries (
  delivery_id text PRIMARY KEY,
  message_seq bigint NOT NULL REFERENCES __SCHEMA__.messages (seq) ON DELETE CASCADE,
  topic text NOT NULL,
  grp text NOT NULL,
  msg_key text,
  state smallint NOT NULL,
  attempt integer NOT NULL DEFAULT 0,
  available_at timestamptz NOT NULL,
  lease_until timestamptz,
  -- Finished rows keep the token and holder of their last claim (debugging, and
  -- telling a stale from a current claim in one ack); every fenced write
  -- also requires state = 1.
  claim_token uuid,
  holder text,
  last_error text,
  finished_at timestamptz
) WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);

-- Live work only: claims walk this in publish order, however many finished
-- rows wait for the janitor.
CREATE INDEX deliveries_live ON __SCHEMA__.deliveries (topic, grp, message_seq) WHERE state < 2 /* acked */;
-- The head-of-lane test of keyed deliveries.
CREATE INDEX deliveries_lane ON __SCHEMA__.deliveries (topic, grp, msg_key, message_seq) WHERE state < 2 /* acked */ AND msg_key IS NOT NULL;
-- Counting a group's leases (maxInFlight, stats) without walking its pending rows.
CREATE INDEX deliveries_leased ON __SCHEMA__.deliveries (topic, grp, lease_until) WHERE state = 1 /* leased */;
-- The cascade from messages, and the purge's "is every delivery finished" probe.
CREATE INDEX deliveries_message ON __SCHEMA__.deliveries (message_seq);
-- Dead rows: counted per group, purged by age.
CREATE INDEX deliveries_dead ON __SCHEMA__.deliveries (topic, grp, finished_at) WHERE state = 3 /* dead */;
CREATE INDEX deliveries_dead_age ON __SCHEMA__.deliveries (finished_at) WHERE state = 3 /* dead */;

-- The janitor role: one row, held by one instance until `until` (database clock).
CREATE TABLE __SCHEMA__.janitor (
  name text PRIMARY KEY,
  holder text NOT NULL,
  until timestamptz NOT NULL
);
