-- The messages of topic @topic past a group's cursor @after, for stats: each
-- is one pending delivery that has no row yet (all are due from due_at). n
-- counts them; oldest is the earliest due_at of those due at @now (null:
-- none is).
SELECT count(*) AS n, min(CASE WHEN due_at <= @now THEN due_at END) AS oldest
FROM ferry_messages WHERE topic = @topic AND seq > @after
