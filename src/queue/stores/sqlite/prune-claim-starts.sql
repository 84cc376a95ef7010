-- Deletes the claim starts of group @grp on topic @topic at or before
-- @since: out of the rate limit's window, never counted again. Done by each
-- rate-limited claim, so the table holds at most one window per group.
DELETE FROM ferry_claim_starts WHERE topic = @topic AND grp = @grp AND started_at <= @since
