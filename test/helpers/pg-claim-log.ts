/**
 * The claim instants a Postgres queue schema's claims wrote, for tests that
 * check rate limits and pauses across processes: a trigger (in the test's
 * schema only) logs every delivery a claim takes, with the claim's own
 * database clock reading, recovered from the lease it set (lease_until
 * minus the lease length, which the test fixes). Deliveries of one claim
 * share the instant, so the instant also tells claims apart.
 */
import { adminPool } from '../stores/postgres-env.js';

/** One delivery taken by one claim. */
export interface ClaimLogRow {
  deliveryId: string;
  attempt: number;
  /** The claim's instant, µs since the epoch (database clock). */
  atUs: number;
}

/** Starts logging the claims of `schema`, whose subscriptions all lease for `leaseMs`. */
export async function installClaimLog(schema: string, leaseMs: number): Promise<void> {
  const s = `"${schema}"`;
  await adminPool.query(`CREATE TABLE ${s}.claim_log (delivery_id text NOT NULL, attempt integer NOT NULL, at timestamptz NOT NULL)`);
  await adminPool.query(
    `CREATE FUNCTION ${s}.log_claim() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       INSERT INTO ${s}.claim_log VALUES (NEW.delivery_id, NEW.attempt, NEW.lease_until - ${Math.trunc(leaseMs)} * interval '1 millisecond');
       RETURN NEW;
     END $$`,
  );
  // A claim is the update that sets a new claim token on a row.
  await adminPool.query(
    `CREATE TRIGGER log_claim AFTER UPDATE ON ${s}.deliveries FOR EACH ROW
     WHEN (NEW.claim_token IS NOT NULL AND NEW.claim_token IS DISTINCT FROM OLD.claim_token) EXECUTE FUNCTION ${s}.log_claim()`,
  );
}

/** Every logged claim of a delivery, in claim order. */
export async function readClaimLog(schema: string): Promise<ClaimLogRow[]> {
  const res = await adminPool.query<{ delivery_id: string; attempt: number; us: string }>(
    `SELECT delivery_id, attempt, (extract(epoch FROM at) * 1000000)::bigint::text AS us FROM "${schema}".claim_log ORDER BY at, delivery_id`,
  );
  return res.rows.map((r) => ({ deliveryId: r.delivery_id, attempt: r.attempt, atUs: Number(r.us) }));
}
