-- Version 3 makes deliveries lazily. ferry_groups.cursor_seq is the highest
-- message seq the group has a delivery row for (or chose to skip, for a
-- group that starts from the latest message); a publish writes only its
-- ferry_messages row, and a claim first turns the messages past its group's
-- cursor into pending deliveries, in seq order. A publish no longer costs a
-- row and two index entries per group, and a group that starts from the
-- earliest message no longer copies the topic's backlog when created.
--
-- Version 2 made every delivery at publish, so every group already has a
-- delivery for each stored message it should see: its cursor is the newest
-- message.
ALTER TABLE ferry_groups ADD COLUMN cursor_seq INTEGER NOT NULL DEFAULT 0;
UPDATE ferry_groups SET cursor_seq = (SELECT coalesce(max(seq), 0) FROM ferry_messages);
