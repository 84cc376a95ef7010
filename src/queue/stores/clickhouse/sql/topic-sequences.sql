-- The next sequence number of each of topics {topics} that has one.
SELECT topic, argMax(next_seq, ver) AS l_next_seq
FROM __DB__.topics
WHERE topic IN {topics}
GROUP BY topic
