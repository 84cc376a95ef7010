-- The unexpired leases of group $2 on topic $1, by the database clock. Run
-- after claim-lock-group in the same transaction, so it counts committed
-- leases and nothing can add one before this transaction's claim commits.
SELECT count(*)::int AS n FROM __SCHEMA__.deliveries
WHERE topic = $1 AND grp = $2 AND state = 1 /* leased */ AND lease_until > (SELECT clock_timestamp())
