-- Counts of group {grp} on topic {topic} at server time {now}: live
-- (pending or leased), leased under an unexpired lease, dead; and when the
-- longest-waiting due one became claimable (oldest_due, with due > 0 when
-- there is one): a pending delivery at the later of its available_at
-- (deliverAt or backoff end; 0 for an immediate one) and its message's due
-- time (deliverAt or publish time), a leased one at its lease's expiry. A
-- pending delivery whose message row is missing (append not committed) is
-- not due.
SELECT countIf(l_state < 2) AS live,
       countIf(l_state = 1 AND l_lease_until > {now}) AS leased,
       countIf(l_state = 3) AS dead,
       countIf(is_due) AS due,
       minIf(l_due_at, is_due) AS oldest_due
FROM (
  SELECT l_state, l_lease_until,
         if(l_state = 0, greatest(l_available_at, m_due_at), l_lease_until) AS l_due_at,
         l_state < 2 AND l_due_at <= {now} AND (l_state = 1 OR m_found = 1) AS is_due
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
