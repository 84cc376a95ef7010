-- The server clock in milliseconds (servers with now64, 20.1 and later).
SELECT toUnixTimestamp64Milli(now64(3)) AS reading
