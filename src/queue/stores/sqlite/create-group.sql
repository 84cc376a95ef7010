-- Registers group @grp on topic @topic at @now, its cursor at @cursor: 0 to
-- start before every stored message ('earliest'), the newest seq
-- (newest-seq.sql) to start after it ('latest'). A group already registered
-- keeps its cursor.
INSERT INTO ferry_groups (topic, grp, created_at, cursor_seq) VALUES (@topic, @grp, @now, @cursor)
ON CONFLICT DO NOTHING
