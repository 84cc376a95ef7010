-- Moves the cursor of group @grp on topic @topic to @cursor, once a claim
-- has made the deliveries of the messages up to it (make-delivery.sql).
UPDATE ferry_groups SET cursor_seq = @cursor WHERE topic = @topic AND grp = @grp
