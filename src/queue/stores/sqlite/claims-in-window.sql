-- How many claims group @grp on topic @topic started after @since (the
-- database clock's now minus the rate limit's window): what the rate limit
-- counts. A range of the table's key.
SELECT coalesce(sum(claims), 0) FROM ferry_claim_starts WHERE topic = @topic AND grp = @grp AND started_at > @since
