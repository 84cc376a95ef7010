-- The locker's table and fence sequence, made when missing (one statement
-- each, run in order). A released key keeps its row with its lease ended:
-- the next take updates it in place.
CREATE SCHEMA IF NOT EXISTS __SCHEMA__;
CREATE TABLE IF NOT EXISTS __SCHEMA__.locks (key_hash text PRIMARY KEY, key text NOT NULL, token text NOT NULL, fence bigint NOT NULL, until timestamptz NOT NULL);
CREATE SEQUENCE IF NOT EXISTS __SCHEMA__.lock_fences;
