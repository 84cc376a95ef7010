-- The cursor of group @grp on topic @topic: the highest message seq it has a
-- delivery row for, or chose to skip. No row: the group is not registered.
SELECT cursor_seq FROM ferry_groups WHERE topic = @topic AND grp = @grp
