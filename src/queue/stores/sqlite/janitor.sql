-- Takes or renews the janitor lease for @holder until @now + @ttlMs: granted
-- when no one holds it, its holder's lease has run out, or @holder holds it
-- already. One row changed: granted.
INSERT INTO ferry_janitor (name, holder, until) VALUES ('janitor', @holder, @now + @ttlMs)
ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
WHERE ferry_janitor.until <= @now OR ferry_janitor.holder = excluded.holder
