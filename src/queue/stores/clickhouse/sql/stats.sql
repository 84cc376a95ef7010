-- Counts of group {grp} on topic {topic} at server time {now}: live
-- (pending or leased), leased under an unexpired lease, dead; and when the
-- longest-waiting due one became claimable (oldest_due, meaningful when due
-- > 0). A pending delivery with available_at 0 was due at once, since its
-- message's publish time (due_at, joined; one whose message row is missing
-- has an append not committed yet and is not due); one with available_at >
-- 0 (its deliverAt or backoff end on the server clock) since then; a leased
-- one since its lease expired.
SELECT countIf(l_state < 2) AS live,
       countIf(l_state = 1 AND l_lease_until > {now}) AS leased,
       countIf(l_state = 3) AS dead,
       countIf(is_due) AS due,
       minIf(l_due_at, is_due) AS oldest_due
FROM (
  SELECT l_state, l_lease_until,
         if(l_state = 0, if(l_available_at > 0, l_available_at, m_due_at), l_lease_until) AS l_due_at,
         (l_state = 0 AND ((l_available_at = 0 AND m_found = 1) OR (l_available_at > 0 AND l_available_at <= {now})))
           OR (l_state = 1 AND l_lease_until <= {now}) AS is_due
  FROM (
    SELECT delivery_id, argMax(message_id, ver) AS l_message_id, argMax(state, ver) AS l_state,
           argMax(lease_until, ver) AS l_lease_until, argMax(available_at, ver) AS l_available_at
    FROM __DB__.deliveries
    WHERE topic = {topic} AND grp = {grp}
    GROUP BY delivery_id
  ) ANY LEFT JOIN (
    SELECT id AS l_message_id, argMax(due_at, ver) AS m_due_at, toUInt8(1) AS m_found
    FROM __DB__.messages
    WHERE topic = {topic}
    GROUP BY id
  ) USING (l_message_id)
)
