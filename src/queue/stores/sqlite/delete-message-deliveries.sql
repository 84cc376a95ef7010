-- Deletes the deliveries of message @seq: the janitor, before the message
-- itself (delete-message.sql).
DELETE FROM ferry_deliveries WHERE message_seq = @seq
