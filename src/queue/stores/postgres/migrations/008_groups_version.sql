-- A publish batch in one statement (append.sql). An instance remembers the
-- groups of each topic it publishes to, with the topic's groups_version when
-- it read them; the append locks the topics' rows and stores nothing unless
-- every version is still the one remembered (then the instance reads the
-- groups again under the lock, in a transaction, as every append did before).
-- The version lives on the topic's row because a row lock returns the row's
-- newest committed version, even one committed after the statement's
-- snapshot was taken: a group registered while the append waited for the
-- lock is seen, where a read of the groups table in the same statement
-- would miss it.
--
-- The trigger sets the version on every insert and delete of a group,
-- whatever wrote it (an older ferry too), inside that transaction, which
-- holds the topic's row lock already (lock-topics.sql), so no append can
-- pass between the group's change and the version's. The version is the
-- changing transaction's 64-bit ID, which the cluster never hands out
-- twice: a version remembered from a schema since dropped and made again
-- cannot match by chance, as a counter restarting at 0 could. Nothing
-- indexes the column: the update is HOT. Existing topics start at 0.
ALTER TABLE __SCHEMA__.topics ADD COLUMN groups_version bigint NOT NULL DEFAULT 0;

CREATE FUNCTION __SCHEMA__.set_groups_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE __SCHEMA__.topics SET groups_version = txid_current()
  WHERE topic = CASE WHEN TG_OP = 'DELETE' THEN OLD.topic ELSE NEW.topic END;
  RETURN NULL;
END
$$;

CREATE TRIGGER groups_version AFTER INSERT OR DELETE ON __SCHEMA__.groups
FOR EACH ROW EXECUTE FUNCTION __SCHEMA__.set_groups_version();
