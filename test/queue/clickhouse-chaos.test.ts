/**
 * The multi-instance proof for ClickHouse on real processes: 2 worker
 * processes of one group share a Redis locker and consume 400 messages over
 * 40 keys; one worker is SIGKILLed mid-run (twice, each time replaced). From
 * the workers' logs (see chaos-check.ts): every message succeeded, extra
 * successes follow a kill or a lost lease, per-key order held, no more than
 * maxInFlight (6) handlers ran at once, and nothing is left pending, leased
 * or dead. Everything the test opens is closed on the failure path too.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { createStoreQueue } from '../../src/queue/engine.js';
import { RedisLocker } from '../../src/queue/lockers/redis.js';
import { ClickHouseStore } from '../../src/queue/stores/clickhouse/store.js';
import { CLICKHOUSE_SKIP, CLICKHOUSE_URL, dropDatabase, testDatabase } from '../stores/clickhouse-env.js';
import { counts, sleep } from '../stores/helpers.js';
import { checkGroup } from './chaos-check.js';
import { spawnTsx } from '../helpers/children.js';
import type { Line } from './chaos-check.js';

const here = dirname(fileURLToPath(import.meta.url));
const REDIS_URL = process.env.FERRY_TEST_REDIS_URL || 'redis://127.0.0.1:6379';
const MESSAGES = 400;
const KEYS = 40;
const MAX_IN_FLIGHT = 6;

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
const noRedis = await redisSkip();
if (noRedis && process.env.CI === 'true') throw new Error(`CI=true: ${noRedis}`);

describe('clickhouse store under SIGKILL with a Redis locker', { skip: CLICKHOUSE_SKIP ?? (noRedis ? `skipped: ${noRedis}` : undefined) }, () => {
  const database = testDatabase('chaos');
  const dir = mkdtempSync(join(tmpdir(), 'ferry-ch-chaos-'));
  after(async () => {
    await dropDatabase(database);
    rmSync(dir, { recursive: true, force: true });
  });

  // The timeout only catches a hang: the run takes well under a minute unloaded.
  it('2 workers, one killed mid-run twice: complete, ordered per key, capped, duplicates explained', { timeout: 900_000 }, async (t) => {
    const locker = await RedisLocker.open({ url: REDIS_URL, prefix: `ferry-chaos:${database}:` });
    const store = await ClickHouseStore.open({ url: CLICKHOUSE_URL, database, locker, lockTtlMs: 2000 }).catch(async (err: unknown) => {
      await locker.close();
      throw err;
    });
    const producer = createStoreQueue(store, { onError: () => undefined });
    const kills = new Map<string, number>();
    const workers: Array<{ name: string; child: ChildProcess }> = [];
    const kill = async (w: { name: string; child: ChildProcess }) => {
      if (w.child.exitCode === null && w.child.signalCode === null) {
        const exited = new Promise((resolve) => w.child.once('exit', resolve));
        w.child.kill('SIGKILL');
        await exited;
      }
      kills.set(w.name, Date.now());
    };
    try {
      await store.ensureGroup('chaos', 'g', 'latest');
      for (let i = 0; i < MESSAGES; i += 100) {
        await producer.publish(...Array.from({ length: 100 }, (_, j) => ({ topic: 'chaos', id: `m${i + j}`, key: `k${(i + j) % KEYS}`, payload: new TextEncoder().encode(String(i + j)) })));
      }

      let next = 0;
      const start = () => {
        const name = `w${next++}`;
        const child = spawnTsx(join(here, 'fixtures', 'ch-chaos-worker.ts'), [CLICKHOUSE_URL, database, 'g', join(dir, `${name}.log`), REDIS_URL, name], {
          stdio: ['ignore', 'ignore', 'inherit'],
        });
        workers.push({ name, child });
      };
      start();
      start();

      const remaining = async () => {
        const s = await store.stats('chaos', 'g');
        return s.pending + s.leased + s.dead;
      };
      let killed = 0;
      for (;;) {
        const left = await remaining();
        if (left === 0) break;
        if (t.signal.aborted) throw new Error(`the test was cancelled (timed out) with ${left} deliveries left: the workers never finished`);
        // Kill a worker when a third and when two thirds of the work is done.
        if ((killed === 0 && left < (MESSAGES * 2) / 3) || (killed === 1 && left < MESSAGES / 3)) {
          const victim = workers.splice(Math.floor(Math.random() * workers.length), 1)[0]!;
          await kill(victim);
          killed++;
          start();
        }
        await sleep(200);
      }
      for (const w of workers.splice(0)) await kill(w);
      assert.equal(killed, 2, 'a worker was killed mid-run twice');
      assert.deepEqual(counts(await store.stats('chaos', 'g')), { pending: 0, leased: 0, dead: 0 });
    } finally {
      for (const w of workers.splice(0)) await kill(w);
      await producer.close();
      await locker.close();
    }

    const lines: Line[] = readdirSync(dir)
      .flatMap((f) => readFileSync(join(dir, f), 'utf8').split('\n'))
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Line);
    const { runs, duplicates, peak } = checkGroup(lines, kills, 'g', MESSAGES, MAX_IN_FLIGHT);
    assert.ok(peak > MAX_IN_FLIGHT / 2, `handlers of both workers never overlapped enough (peak ${peak}) to test the cap`);
    process.stdout.write(`# g: ${runs} runs, ${duplicates} duplicate successes, peak ${peak} in flight\n`);
  });
});
