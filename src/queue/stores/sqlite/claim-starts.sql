-- The claim starts of group @grp on topic @topic after @since, oldest first
-- (the table's key order): when the rate limit held a claim back, the store
-- finds in them when the window has room again (claim.ts).
SELECT started_at, claims FROM ferry_claim_starts WHERE topic = @topic AND grp = @grp AND started_at > @since ORDER BY started_at
