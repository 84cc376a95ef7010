-- Deletes every delivery of group @grp on topic @topic, before the group
-- itself (remove-group.sql). Through the topic's messages: every delivery of
-- the group belongs to one, and both indexes used exist already (there is no
-- index over every state by group).
DELETE FROM ferry_deliveries WHERE grp = @grp AND message_seq IN (SELECT seq FROM ferry_messages WHERE topic = @topic)
