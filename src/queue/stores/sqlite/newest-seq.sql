-- The seq of the newest stored message (0: none): where a group that starts
-- from the latest message puts its cursor. Every later message has a larger
-- seq (append.sql).
SELECT coalesce(max(seq), 0) FROM ferry_messages
