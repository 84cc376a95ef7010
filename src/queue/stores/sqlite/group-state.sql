-- The cursor of group @grp on topic @topic (as group-cursor.sql) and whether
-- it is paused (1) or not (0), read by a claim inside its transaction. No
-- row: the group is not registered.
SELECT cursor_seq, paused FROM ferry_groups WHERE topic = @topic AND grp = @grp
