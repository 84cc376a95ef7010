-- Every schedule not deleted, by name (bytes: names are ASCII, so this is
-- code-unit order), each as its latest version taken whole. spec and payload
-- come back as hex (any bytes).
SELECT name, tupleElement(l, 1) AS l_revision, hex(tupleElement(l, 2)) AS l_spec_hex, hex(tupleElement(l, 3)) AS l_payload_hex,
       tupleElement(l, 4) AS l_updated_at, tupleElement(l, 5) AS l_ticked, tupleElement(l, 6) AS l_last_tick
FROM (
  SELECT name, argMax(tuple(revision, spec, payload, updated_at, ticked, last_tick, deleted), ver) AS l
  FROM __DB__.schedules
  GROUP BY name
)
WHERE tupleElement(l, 7) = 0
ORDER BY name
