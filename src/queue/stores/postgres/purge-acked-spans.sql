-- Deletes the spans of acks that finished more than $1 ms ago, about $2 of
-- them, oldest first (those up to the $2-th oldest's time, ties included):
-- past the acked retention they protect no message any more
-- (purge-victims.sql). Both reads are ranges of acked_spans_finished.
WITH cutoff AS MATERIALIZED (
  SELECT clock_timestamp() - $1 * interval '1 millisecond' AS at
),
last AS MATERIALIZED (
  SELECT coalesce((
    SELECT s.finished_at FROM __SCHEMA__.acked_spans s
    WHERE s.finished_at < (SELECT at FROM cutoff)
    ORDER BY s.finished_at
    OFFSET $2 - 1
    LIMIT 1), 'infinity') AS at
)
DELETE FROM __SCHEMA__.acked_spans a
WHERE a.finished_at < (SELECT at FROM cutoff) AND a.finished_at <= (SELECT at FROM last)
