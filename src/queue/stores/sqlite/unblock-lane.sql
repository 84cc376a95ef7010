-- Moves key lane @key of group @grp on topic @topic on: its first live
-- delivery, if blocked, is no longer (it joins the claim's index,
-- ferry_deliveries_heads). Run after ack.sql or kill.sql took the lane's head
-- out of the live rows; two probes of the lane index and one row write.
UPDATE ferry_deliveries SET blocked = 0
WHERE grp = @grp AND blocked = 1 AND message_seq = (
  SELECT message_seq FROM ferry_deliveries
  WHERE topic = @topic AND grp = @grp AND msg_key = @key AND state < 2 /* acked */
  ORDER BY message_seq LIMIT 1)
