/**
 * Partitions, Jepsen style: 3 worker processes on one Postgres schema, each
 * through a TCP proxy the test controls. In each round 2,000 keyed messages
 * (a fifth of them failing their first attempt) are consumed while one
 * worker, holding leases, is cut off from the database for two lease
 * durations and then healed. At the end of every round: every message
 * succeeded; the store's audit of every update shows each one made by the
 * worker holding the delivery's latest claim (fencing: no write of a
 * partitioned worker landed after its lease was taken over); the store
 * confirmed exactly one completion per delivery, of the
 * attempt it holds last; every other success lost its lease or
 * its ack; per-key order held; nothing is pending, leased or dead.
 *
 * Rounds: FERRY_PARTITION_ROUNDS, else 10 with FERRY_LONG=1, else 2.
 */
import assert from 'node:assert/strict';
import { WorkerWatch, spawnChild } from '../helpers/children.js';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { counts, sleep, waitFor } from '../stores/helpers.js';
import { POSTGRES_SKIP, POSTGRES_URL, adminPool, dropSchema, testSchema } from '../stores/postgres-env.js';
import { checkFencing, checkRound, type AuditRow, type FinalRow, type PartitionLine } from './partition-check.js';

const here = dirname(fileURLToPath(import.meta.url));
const ROUNDS = Number(process.env.FERRY_PARTITION_ROUNDS || (process.env.FERRY_LONG === '1' ? 10 : 2));
const MESSAGES = 2000;
const KEYS = 200;
const WORKERS = 3;
const GROUP = 'g';
/** The workers' `leaseDurationMs` (see fixtures/pg-partition-worker.ts). */
const LEASE_MS = 1500;

describe('postgres store under network partitions', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('part');
  const dir = mkdtempSync(join(tmpdir(), 'ferry-pg-partition-'));
  const children = new Set<ChildProcess>();
  const workerWatch = new WorkerWatch();
  const proxies = new Set<TcpProxy>();
  let direct: PostgresStore | undefined;
  after(async () => {
    for (const c of children) c.kill('SIGKILL');
    for (const p of proxies) await p.close();
    await direct?.close();
    await dropSchema(schema);
    rmSync(dir, { recursive: true, force: true });
  });

  it(`${ROUNDS} rounds of 3 workers, one partitioned for 2 leases while holding some: complete, fenced, ordered, duplicates explained`, { timeout: ROUNDS * 240_000 }, async () => {
    direct = await PostgresStore.open({ connectionString: POSTGRES_URL, schema });
    // The store's own record of who wrote what: every update of a delivery, with the writer's application_name.
    // An ack deletes its row: audited as a write to state 2, and the row kept in acked for the final check.
    await adminPool.query(`
      CREATE TABLE "${schema}".audit (n bigserial PRIMARY KEY, delivery_id text, topic text, grp text, app text, old_state smallint, new_state smallint, old_token uuid, new_token uuid);
      CREATE TABLE "${schema}".acked (delivery_id text, message_seq bigint, topic text, grp text, attempt integer);
      CREATE FUNCTION "${schema}".audit_update() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        IF TG_OP = 'DELETE' THEN
          INSERT INTO "${schema}".audit (delivery_id, topic, grp, app, old_state, new_state, old_token, new_token)
          VALUES (OLD.delivery_id, OLD.topic, OLD.grp, current_setting('application_name'), OLD.state, 2, OLD.claim_token, OLD.claim_token);
          INSERT INTO "${schema}".acked VALUES (OLD.delivery_id, OLD.message_seq, OLD.topic, OLD.grp, OLD.attempt);
          RETURN OLD;
        END IF;
        -- Migration 9's trigger clears the flag of the row an ack or dead letter freed: written by whoever freed its lane, not under a claim of it.
        IF (OLD.state, OLD.claim_token, OLD.lease_until, OLD.attempt) IS NOT DISTINCT FROM (NEW.state, NEW.claim_token, NEW.lease_until, NEW.attempt) AND OLD.blocked <> NEW.blocked THEN
          RETURN NEW;
        END IF;
        INSERT INTO "${schema}".audit (delivery_id, topic, grp, app, old_state, new_state, old_token, new_token)
        VALUES (NEW.delivery_id, NEW.topic, NEW.grp, current_setting('application_name'), OLD.state, NEW.state, OLD.claim_token, NEW.claim_token);
        RETURN NEW;
      END $$;
      CREATE TRIGGER audit AFTER UPDATE OR DELETE ON "${schema}".deliveries FOR EACH ROW EXECUTE FUNCTION "${schema}".audit_update();
    `);
    const u = new URL(POSTGRES_URL);
    const target = u.hostname === 'localhost' || u.hostname === '' ? '127.0.0.1' : u.hostname;
    for (let round = 0; round < ROUNDS; round++) {
      const topic = `part${round}`;
      await direct.ensureGroup(topic, GROUP, 'latest');
      for (let i = 0; i < MESSAGES; i += 500) {
        await direct.append(
          Array.from({ length: 500 }, (_, j) => ({ id: `r${round}m${i + j}`, topic, key: `k${(i + j) % KEYS}`, payload: new TextEncoder().encode(String(i + j)), publishedAt: new Date() })),
        );
      }

      // Even rounds: timeouts longer than the partition, so what the cut-off worker sent meanwhile
      // (acks, heartbeats of leases since taken over) reaches the server after it heals; fencing
      // must refuse it. Odd rounds: short timeouts, so its calls fail while it is cut off.
      const silent = round % 2 === 0;
      const queryTimeoutMs = silent ? 4 * LEASE_MS : LEASE_MS / 3;
      const workers: Array<{ name: string; child: ChildProcess; proxy: TcpProxy; log: string }> = [];
      for (let w = 0; w < WORKERS; w++) {
        const proxy = await TcpProxy.start(Number(u.port || 5432), target);
        proxies.add(proxy);
        const name = `r${round}w${w}`;
        const log = join(dir, `${name}.log`);
        const url = new URL(proxy.url(POSTGRES_URL));
        url.searchParams.set('application_name', name);
        const child = spawnChild(process.execPath, ['--import', 'tsx', join(here, 'fixtures', 'pg-partition-worker.ts'), url.toString(), schema, topic, GROUP, log, name, String(queryTimeoutMs)], {
          stdio: ['ignore', 'ignore', 'inherit'],
        });
        children.add(child);
        child.on('exit', () => children.delete(child));
        workerWatch.watch(child, name);
        workers.push({ name, child, proxy, log });
      }
      const read = (file: string): PartitionLine[] => {
        try {
          return readFileSync(file, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as PartitionLine);
        } catch {
          return [];
        }
      };
      // The group existed before the first publish: a message without a delivery row was acked.
      const acked = async () =>
        Number((await adminPool.query(`SELECT count(*) AS n FROM "${schema}".messages m WHERE m.topic = $1 AND NOT EXISTS (SELECT 1 FROM "${schema}".deliveries d WHERE d.message_seq = m.seq)`, [topic])).rows[0].n);

      // Partition a worker while it holds leases: one of its handlers has started and not ended.
      const victim = workers[round % WORKERS]!;
      const holding = () => {
        const lines = read(victim.log);
        const ended = new Set(lines.filter((l) => l.t === 'e').map((l) => `${l.id} ${l.a}`));
        return lines.some((l) => l.t === 's' && !ended.has(`${l.id} ${l.a}`));
      };
      await waitFor(async () => (workerWatch.check(), (await acked()) >= MESSAGES / 10 && holding()), 120_000, `${victim.name} to hold a lease after a tenth of the messages`);
      victim.proxy.freeze();
      const cutAt = Date.now();
      await sleep(2 * LEASE_MS);
      victim.proxy.thaw();
      const healedAt = Date.now();

      await waitFor(async () => (workerWatch.check(), counts(await direct!.stats(topic, GROUP)).pending + counts(await direct!.stats(topic, GROUP)).leased === 0), 180_000, `round ${round} to complete`);
      // Runs whose leases were taken over end once their worker sees the lapse.
      await sleep(2 * LEASE_MS);
      for (const w of workers) {
        const exited = new Promise((resolve) => w.child.once('exit', resolve));
        w.child.kill('SIGKILL');
        await exited;
        proxies.delete(w.proxy);
        await w.proxy.close();
      }
      const killedAt = Date.now();

      assert.deepEqual(counts(await direct.stats(topic, GROUP)), { pending: 0, leased: 0, dead: 0 }, `round ${round}`);
      const lines = workers.flatMap((w) => read(w.log));
      const victimErrors = lines.filter((l) => l.w === victim.name && l.t === 'err' && l.at >= cutAt && l.at <= healedAt + LEASE_MS);
      const victimLost = lines.filter((l) => l.w === victim.name && l.t === 'lost' && l.at >= cutAt);
      if (silent) assert.ok(victimLost.length > 0, `round ${round}: ${victim.name} lost no lease to the partition`);
      else assert.ok(victimErrors.length > 0, `round ${round}: ${victim.name} reported no failed store call while cut off`);
      const rows = (
        await adminPool.query<FinalRow>(
          `SELECT d.delivery_id, m.id AS message_id, d.attempt, d.state
           FROM (SELECT delivery_id, message_seq, topic, grp, attempt, state FROM "${schema}".deliveries
                 UNION ALL SELECT delivery_id, message_seq, topic, grp, attempt, 2 FROM "${schema}".acked) d
           JOIN "${schema}".messages m ON m.seq = d.message_seq WHERE d.topic = $1 AND d.grp = $2`,
          [topic, GROUP],
        )
      ).rows;
      const audit = (
        await adminPool.query<AuditRow>(`SELECT a.* FROM "${schema}".audit a WHERE a.topic = $1 AND a.grp = $2`, [topic, GROUP])
      ).rows;
      const updates = checkFencing(audit);
      const s = checkRound(lines, rows, MESSAGES, killedAt);
      const confirmed = new Set(lines.filter((l) => l.t === 'c').map((l) => `${l.w} ${l.id} ${l.a}`));
      const lostAfterConfirmed = lines.filter((l) => l.t === 'lost' && confirmed.has(`${l.w} ${l.id} ${l.a}`)).length;
      const lostBy = new Map<string, number>();
      for (const l of lines.filter((l) => l.t === 'lost')) lostBy.set(`${l.w === victim.name ? 'victim' : 'other'}/${l.op}`, (lostBy.get(`${l.w === victim.name ? 'victim' : 'other'}/${l.op}`) ?? 0) + 1);
      process.stdout.write(`# round ${round} (${silent ? 'held statements land after the heal' : 'calls fail while cut off'}): ${updates} fenced updates, ${s.runs} runs, ${s.duplicates} duplicate successes (${s.explainedByLeaseLost} after leaseLost, ${s.explainedByFailedAck} after a failed ack), ${s.leaseLost} leases lost (${[...lostBy].map(([k, v]) => `${k} ${v}`).join(', ')}; ${lostAfterConfirmed} of them after the same run's ack was confirmed), ${victimErrors.length} store errors on ${victim.name} while cut off\n`);
    }
  });
});
