-- Records that group @grp on topic @topic started @claims claims at @now,
-- for the rate limit (claims-in-window.sql). Claims in the same millisecond
-- share a row.
INSERT INTO ferry_claim_starts (topic, grp, started_at, claims) VALUES (@topic, @grp, @now, @claims)
ON CONFLICT (topic, grp, started_at) DO UPDATE SET claims = claims + excluded.claims
