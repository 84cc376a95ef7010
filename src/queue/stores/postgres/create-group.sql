-- Registers group $2 on topic $1; one row back when it is new.
INSERT INTO __SCHEMA__.groups (topic, grp) VALUES ($1, $2)
ON CONFLICT DO NOTHING
RETURNING grp
