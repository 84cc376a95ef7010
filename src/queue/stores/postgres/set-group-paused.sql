-- Pauses ($3 true) or resumes ($3 false) group $2 of topic $1; one row back
-- when the group is registered. A resume notifies the topic on channel $4
-- (heard once this commits), so other instances claim at once rather than
-- at their next poll. The flag is not indexed: a HOT update of one row.
WITH g AS (
  UPDATE __SCHEMA__.groups SET paused = $3 WHERE topic = $1 AND grp = $2
  RETURNING topic
)
SELECT g.topic, CASE WHEN NOT $3::boolean THEN pg_notify($4, g.topic) END AS woke
FROM g
