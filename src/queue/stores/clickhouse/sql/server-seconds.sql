-- The server clock in whole seconds (every version has now()).
SELECT toUInt64(now()) AS reading
