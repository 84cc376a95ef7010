/**
 * Partitions, Jepsen style, on the ClickHouse store with the Redis locker:
 * 3 worker processes on one ClickHouse database, each reaching ClickHouse
 * through a TCP proxy the test controls (Redis they reach directly: the
 * locker is the shared arbiter, and the store's fencing must hold whatever
 * the locker says, so the cut is between a worker and its data). In each
 * round 300 keyed messages over 30 keys (a fifth of them failing their first
 * attempt) are consumed while one worker, holding leases, is cut off from
 * ClickHouse for two lease durations (4 s leases) and then healed; the cut
 * falls as it sends an insert of delivery rows (between the read a write is
 * computed from and the write), so the fencing of held writes is exercised. 300, not
 * Postgres' 2,000: a claim or ack here is a locked read and an insert of
 * ~100 ms under load, so 300 keep a round near half a minute, and leases of
 * 4 s leave heartbeats (every lease / 3) room for that latency.
 *
 * At the end of every round, from the workers' logs and the store's final
 * rows (checkRound in partition-check.ts): every message succeeded; the
 * store confirmed exactly one completion per delivery, of the attempt it
 * holds last; every other success lost its lease or its ack; per-key order
 * held; nothing is pending, leased or dead.
 *
 * Fencing, from the store (checkVersions): the store never updates a row;
 * every change is a new version row, and the largest `ver` wins (merges may
 * drop older versions at any time). So the test copies every row inserted
 * into `deliveries` into a plain MergeTree audit table (a materialized view:
 * an insert trigger), which keeps every version, including writes that lost.
 * A claim writes the version it read + 2 under a new `claim_token`; every
 * other write (heartbeat, ack, retry, kill, release) writes the version it
 * read + 1 and keeps the token (retry and release clear it). Per delivery,
 * in version order: no two rows share a version (the server would pick
 * either); each claim derives from a pending or leased row 2 below it; each
 * other row derives from the leased row just below it under the same token.
 * Then every row written with a token carries the token of the claim that was
 * current, in the order the store reads by, when it was written: a write of
 * a partitioned worker whose lease was taken over can at most land just below
 * the claim that took it (outranked, counted as "outranked"), never after
 * it. Rows are compared by version, not by arrival: a held write arriving
 * late is harmless exactly when its version is below the takeover.
 *
 * Even rounds: the store's request timeout (4 leases) is longer than the
 * partition, so what the cut-off worker sent meanwhile reaches ClickHouse
 * after it heals. Odd rounds: 1/3 lease, so its calls fail while cut off.
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
import { Redis } from 'ioredis';
import { RedisLocker } from '../../src/queue/lockers/redis.js';
import { ClickHouseStore } from '../../src/queue/stores/clickhouse/store.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';
import { CLICKHOUSE_SKIP, CLICKHOUSE_URL, adminQuery, dropDatabase, testDatabase } from '../stores/clickhouse-env.js';
import { counts, sleep, waitFor } from '../stores/helpers.js';
import { checkRound, checkVersions, type FinalRow, type PartitionLine, type VersionRow } from './partition-check.js';

const here = dirname(fileURLToPath(import.meta.url));
const REDIS_URL = process.env.FERRY_TEST_REDIS_URL || 'redis://127.0.0.1:6379';
const ROUNDS = Number(process.env.FERRY_PARTITION_ROUNDS || (process.env.FERRY_LONG === '1' ? 10 : 2));
const MESSAGES = 300;
const KEYS = 30;
const WORKERS = 3;
const GROUP = 'g';
const LEASE_MS = 4000;
/**
 * The workers' lock TTL when calls fail during the cut: a lock held by the
 * cut-off worker lapses within the partition. A store's requests must end
 * before its locks do (a write held past its lock's end could land after
 * another instance's claim: the run that found this had two claims share a
 * version), so rounds whose held writes land after the heal use a TTL above
 * their request timeout.
 */
const LOCK_TTL_MS = 3000;

async function redisSkip(): Promise<string | undefined> {
  const c = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  c.on('error', () => undefined);
  try {
    await c.connect();
    return undefined;
  } catch (err) {
    return `Redis at ${REDIS_URL} is unreachable (${(err as Error).message})`;
  } finally {
    c.disconnect();
  }
}
const noRedis = CLICKHOUSE_SKIP ? undefined : await redisSkip();
if (noRedis && process.env.CI === 'true') throw new Error(`CI=true: ${noRedis}`);

async function jsonRows<T>(sql: string): Promise<T[]> {
  return (await adminQuery(`${sql} FORMAT JSONEachRow`))
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as T);
}

describe('clickhouse store under network partitions with a Redis locker', { skip: CLICKHOUSE_SKIP ?? (noRedis ? `skipped: ${noRedis}` : undefined) }, () => {
  const database = testDatabase('part');
  const prefix = `ferry-part:${database}:`;
  const dir = mkdtempSync(join(tmpdir(), 'ferry-ch-partition-'));
  const children = new Set<ChildProcess>();
  const workerWatch = new WorkerWatch();
  const proxies = new Set<TcpProxy>();
  let direct: ClickHouseStore | undefined;
  let locker: RedisLocker | undefined;
  after(async () => {
    for (const c of children) c.kill('SIGKILL');
    for (const p of proxies) await p.close();
    await direct?.close().catch(() => undefined);
    await locker?.close().catch(() => undefined);
    await dropDatabase(database);
    rmSync(dir, { recursive: true, force: true });
  });

  it(`${ROUNDS} rounds of 3 workers, one cut off from ClickHouse for 2 leases while holding some: complete, fenced, ordered, duplicates explained`, { timeout: ROUNDS * 300_000 }, async () => {
    locker = await RedisLocker.open({ url: REDIS_URL, prefix });
    direct = await ClickHouseStore.open({ url: CLICKHOUSE_URL, database, locker, lockTtlMs: LOCK_TTL_MS });
    // Every version row as inserted; merges of `deliveries` never touch it.
    await adminQuery(
      `CREATE MATERIALIZED VIEW \`${database}\`.audit ENGINE = MergeTree() ORDER BY (topic, grp, delivery_id, ver) AS SELECT topic, grp, delivery_id, message_id, state, attempt, claim_token, holder, ver FROM \`${database}\`.deliveries`,
    );
    const ch = new URL(CLICKHOUSE_URL);
    for (let round = 0; round < ROUNDS; round++) {
      const topic = `part${round}`;
      await direct.ensureGroup(topic, GROUP, 'latest');
      for (let i = 0; i < MESSAGES; i += 100) {
        await direct.append(
          Array.from({ length: 100 }, (_, j) => ({ id: `r${round}m${i + j}`, topic, key: `k${(i + j) % KEYS}`, payload: new TextEncoder().encode(String(i + j)), publishedAt: new Date() })),
        );
      }

      const silent = round % 2 === 0;
      const requestTimeoutMs = silent ? 4 * LEASE_MS : Math.floor(LEASE_MS / 3);
      const lockTtlMs = silent ? requestTimeoutMs + 2000 : LOCK_TTL_MS;
      const workers: Array<{ name: string; child: ChildProcess; proxy: TcpProxy; log: string }> = [];
      for (let w = 0; w < WORKERS; w++) {
        const proxy = await TcpProxy.start(Number(ch.port || 8123), ch.hostname === 'localhost' ? '127.0.0.1' : ch.hostname);
        proxies.add(proxy);
        const name = `r${round}w${w}`;
        const log = join(dir, `${name}.log`);
        const child = spawnChild(
          process.execPath,
          ['--import', 'tsx', join(here, 'fixtures', 'ch-partition-worker.ts'), proxy.url(CLICKHOUSE_URL), database, topic, GROUP, log, name, String(requestTimeoutMs), REDIS_URL, prefix, String(lockTtlMs), String(LEASE_MS)],
          { stdio: ['ignore', 'ignore', 'inherit'] },
        );
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
      const acked = async () => {
        const [r] = await jsonRows<{ n: string }>(
          `SELECT count() AS n FROM (SELECT argMax(state, ver) AS s FROM \`${database}\`.deliveries WHERE topic = '${topic}' AND grp = '${GROUP}' GROUP BY delivery_id) WHERE s = 2`,
        );
        return Number(r!.n);
      };

      // Partition a worker while it holds leases: one of its handlers has started and not ended.
      const victim = workers[round % WORKERS]!;
      const holding = () => {
        const lines = read(victim.log);
        const ended = new Set(lines.filter((l) => l.t === 'e').map((l) => `${l.id} ${l.a}`));
        return lines.some((l) => l.t === 's' && !ended.has(`${l.id} ${l.a}`));
      };
      await waitFor(async () => (workerWatch.check(), (await acked()) >= MESSAGES / 10 && holding()), 120_000, `${victim.name} to hold a lease after a tenth of the messages`);
      // The cut falls as the victim sends a write of deliveries (an ack, heartbeat, retry or
      // claim, after its read): the write is held, and lands after the heal in even rounds.
      const marker = Buffer.from(`INTO \`${database}\`.deliveries`);
      const atWrite = await Promise.race([victim.proxy.freezeOn((chunk) => chunk.includes(marker)).then(() => true), sleep(30_000).then(() => false)]);
      victim.proxy.freeze();
      const cutAt = Date.now();
      await sleep(2 * LEASE_MS);
      victim.proxy.thaw();
      const healedAt = Date.now();

      await waitFor(
        async () => {
          workerWatch.check();
          const c = counts(await direct!.stats(topic, GROUP));
          return c.pending + c.leased === 0;
        },
        240_000,
        `round ${round} to complete`,
      );
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
      const rows = await jsonRows<FinalRow>(
        `SELECT delivery_id, argMax(message_id, ver) AS message_id, argMax(attempt, ver) AS attempt, argMax(state, ver) AS state FROM \`${database}\`.deliveries WHERE topic = '${topic}' AND grp = '${GROUP}' GROUP BY delivery_id`,
      );
      const versions = (
        await jsonRows<VersionRow & { ver: string }>(`SELECT delivery_id, state, attempt, claim_token, holder, toString(ver) AS ver FROM \`${database}\`.audit WHERE topic = '${topic}' AND grp = '${GROUP}'`)
      ).map((r) => ({ ...r, ver: Number(r.ver) }));
      assert.ok(versions.every((r) => Number.isSafeInteger(r.ver)), 'versions fit a double');
      const v = checkVersions(versions);
      const s = checkRound(lines, rows, MESSAGES, killedAt);
      const lostBy = new Map<string, number>();
      for (const l of lines.filter((l) => l.t === 'lost')) {
        const k = `${l.w === victim.name ? 'victim' : 'other'}/${l.op}`;
        lostBy.set(k, (lostBy.get(k) ?? 0) + 1);
      }
      process.stdout.write(
        `# round ${round} (${silent ? 'held requests land after the heal' : 'calls fail while cut off'}): ${v.rows} version rows, ${v.claims} claims, ${v.outranked} writes outranked by a takeover; ${s.runs} runs, ${s.duplicates} duplicate successes (${s.explainedByLeaseLost} after leaseLost, ${s.explainedByFailedAck} after a failed ack), ${s.leaseLost} leases lost (${[...lostBy].map(([k, n]) => `${k} ${n}`).join(', ')}), ${victimErrors.length} store errors on ${victim.name} while cut off; cut ${atWrite ? 'at a write' : 'after 30 s without one'}\n`,
      );
    }
  });
});
