-- The groups registered on topics {topics}.
SELECT topic, grp FROM __DB__.groups WHERE topic IN {topics} GROUP BY topic, grp
