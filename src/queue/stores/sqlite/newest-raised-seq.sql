-- The seq of the newest message of topic @topic whose priority is above 0
-- (0: none): a claim makes its group's deliveries up to it before choosing,
-- so every raised message competes from a row (claim.ts). Read from the
-- partial index of raised messages: one probe.
SELECT coalesce(max(seq), 0) FROM ferry_messages WHERE topic = @topic AND priority > 0
