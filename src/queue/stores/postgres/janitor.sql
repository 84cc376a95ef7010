-- Takes or renews the janitor role for holder $1 for $2 ms (database clock).
-- A row back means $1 holds it.
INSERT INTO __SCHEMA__.janitor (name, holder, until)
VALUES ('janitor', $1, (SELECT clock_timestamp()) + $2 * interval '1 millisecond')
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
WHERE __SCHEMA__.janitor.until <= (SELECT clock_timestamp()) OR __SCHEMA__.janitor.holder = excluded.holder
RETURNING holder
