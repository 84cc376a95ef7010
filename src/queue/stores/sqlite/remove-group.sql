-- Unregisters group @grp on topic @topic, once its deliveries are deleted
-- (remove-group-deliveries.sql). One row changed: the group existed.
DELETE FROM ferry_groups WHERE topic = @topic AND grp = @grp
