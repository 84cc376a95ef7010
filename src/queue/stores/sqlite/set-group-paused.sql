-- Pauses (@paused 1) or resumes (0) group @grp on topic @topic. One row
-- changed: the group is registered (whether or not it was paused already).
UPDATE ferry_groups SET paused = @paused WHERE topic = @topic AND grp = @grp
