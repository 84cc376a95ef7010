-- One row when group {grp} is registered on topic {topic}.
SELECT grp FROM __DB__.groups WHERE topic = {topic} AND grp = {grp} LIMIT 1
