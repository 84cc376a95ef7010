-- How many dead deliveries group @grp on topic @topic keeps, for stats.
SELECT count(*) FROM ferry_deliveries WHERE topic = @topic AND grp = @grp AND state = 3 /* dead */
