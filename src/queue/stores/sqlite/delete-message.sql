-- Deletes message @seq: the janitor, once finished-messages.sql chose it and
-- its deliveries are gone (delete-message-deliveries.sql).
DELETE FROM ferry_messages WHERE seq = @seq
