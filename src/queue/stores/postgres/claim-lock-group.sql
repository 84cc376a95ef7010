-- Taken before a claim with maxInFlight: holding group ($1, $2)'s row until
-- commit serialises that group's claims, so the in-flight count the claim
-- reads next is the committed one and no other claim can exceed it.
SELECT 1 FROM __SCHEMA__.groups WHERE topic = $1 AND grp = $2 FOR NO KEY UPDATE
