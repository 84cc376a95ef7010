-- Ends the lease on row key $1 while token $2 holds it, keeping the row (a
-- newer holder's lease, after this one ran out, stays).
UPDATE __SCHEMA__.locks SET until = '-infinity' WHERE key_hash = $1 AND token = $2
