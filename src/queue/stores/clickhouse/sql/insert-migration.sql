-- Records an applied migration; the row (version, file name) follows as a
-- VALUES tuple.
INSERT INTO __DB__.migrations (version, name) VALUES
