-- Version 8 keeps each key lane's head in the claim's index. Until now the
-- live index held every live delivery, and a claim tested each keyed one for
-- an earlier live delivery of its key: a lane N deep cost N index probes per
-- claim, so draining it cost N^2 / 2 (a lane of 10,000 ran at a few hundred
-- messages a second, all CPU). Now a live keyed delivery behind an earlier
-- live one of its key is `blocked` (1), and the claim's index holds only the
-- live deliveries that are not: every unkeyed one and the head of each lane.
-- An ack or dead-letter of a head unblocks the next delivery of its lane
-- (unblock-lane.sql); a delivery made behind a live one of its key is made
-- blocked (make-delivery.sql).
--
-- Existing rows keep their values; the live keyed rows behind another live
-- row of their key are marked blocked, through the lane index.
ALTER TABLE ferry_deliveries ADD COLUMN blocked INTEGER NOT NULL DEFAULT 0;
UPDATE ferry_deliveries AS d SET blocked = 1
WHERE d.state < 2 /* acked */ AND d.msg_key IS NOT NULL AND EXISTS (
  SELECT 1 FROM ferry_deliveries e
  WHERE e.topic = d.topic AND e.grp = d.grp AND e.msg_key = d.msg_key AND e.state < 2 /* acked */ AND e.message_seq < d.message_seq);
DROP INDEX IF EXISTS ferry_deliveries_live;
CREATE INDEX IF NOT EXISTS ferry_deliveries_heads ON ferry_deliveries (topic, grp, priority DESC, message_seq) WHERE state < 2 /* acked */ AND blocked = 0;
