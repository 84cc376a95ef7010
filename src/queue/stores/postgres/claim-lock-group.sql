-- Taken before a claim with maxInFlight or a rate limit: holding group ($1,
-- $2)'s row until commit serialises that group's claims, so the counts
-- claim-budget reads next are the committed ones and no other claim can
-- exceed them. Returns whether the group is paused (then nothing is
-- claimed); no row when the group is not registered.
SELECT paused FROM __SCHEMA__.groups WHERE topic = $1 AND grp = $2 FOR NO KEY UPDATE
