-- The server's version string, e.g. 18.16.1.
SELECT version() AS v
