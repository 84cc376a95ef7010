-- Takes key $2 (row key $1, its digest) for token $3 for $4 ms, on the
-- database clock, when it is free or its lease has run out. A row comes
-- back, with the next fence, only when this call took the key.
INSERT INTO __SCHEMA__.locks AS l (key_hash, key, token, fence, until)
VALUES ($1, $2, $3, nextval('__SCHEMA__.lock_fences'), clock_timestamp() + $4 * interval '1 millisecond')
ON CONFLICT (key_hash) DO UPDATE
  SET token = excluded.token, fence = nextval('__SCHEMA__.lock_fences'), until = clock_timestamp() + $4 * interval '1 millisecond'
  WHERE l.until <= clock_timestamp()
RETURNING l.fence::text AS fence
