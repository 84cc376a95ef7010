-- Deletes every claim start of group @grp on topic @topic, when the group is
-- removed (remove-group.sql).
DELETE FROM ferry_claim_starts WHERE topic = @topic AND grp = @grp
