-- The latest version of every pending or leased delivery of group {grp} on
-- topic {topic}, in publish order: what a claim chooses from. The state test
-- is applied after the latest version is taken, never before (a filter on an
-- old version would resurrect it). Text that may hold any bytes comes back
-- as hex.
SELECT delivery_id, l_message_id, l_seq, l_key, l_state, l_attempt, l_available_at, l_lease_until, l_token, l_holder_hex, l_error_hex, l_finished_at, l_ver FROM (
  SELECT delivery_id,
    argMax(message_id, ver) AS l_message_id, argMax(seq, ver) AS l_seq, argMax(msg_key, ver) AS l_key,
    argMax(state, ver) AS l_state, argMax(attempt, ver) AS l_attempt, argMax(available_at, ver) AS l_available_at,
    argMax(lease_until, ver) AS l_lease_until, argMax(claim_token, ver) AS l_token,
    hex(argMax(holder, ver)) AS l_holder_hex, hex(argMax(last_error, ver)) AS l_error_hex,
    argMax(finished_at, ver) AS l_finished_at, max(ver) AS l_ver
  FROM __DB__.deliveries
  WHERE topic = {topic} AND grp = {grp}
  GROUP BY delivery_id
) WHERE l_state < 2
ORDER BY l_seq, delivery_id
