-- Up to {limit} messages of topic {topic} (not purged) after sequence
-- number {after}, in publish order: a page of listMessages. Payload and
-- headers come back as hex (any bytes). Filtering on seq before taking the
-- latest version is sound: every version of one incarnation of a message
-- carries the same seq.
SELECT id, l_seq, l_key, l_payload_hex, l_headers_hex, l_published_at, l_deliver_at FROM (
  SELECT id, argMax(seq, ver) AS l_seq, argMax(msg_key, ver) AS l_key,
         hex(argMax(payload, ver)) AS l_payload_hex, hex(argMax(headers, ver)) AS l_headers_hex,
         argMax(published_at, ver) AS l_published_at, argMax(deliver_at, ver) AS l_deliver_at,
         argMax(deleted, ver) AS l_deleted
  FROM __DB__.messages
  WHERE topic = {topic} AND seq > {after}
  GROUP BY id
) WHERE l_deleted = 0
ORDER BY l_seq
LIMIT {limit}
