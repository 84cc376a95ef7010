/**
 * The multi-instance proof on real processes: 4 worker processes in 2 groups
 * consume messages over many keys while workers are SIGKILLed and replaced:
 * in CI 1,500 messages over 300 keys with a kill at each fifth of the work
 * (4 kills mid-run); under FERRY_LONG=1 (`npm run test:long`) 5,000 messages
 * over 1,000 keys with a kill every 2 s until done. From the workers' logs of
 * handler starts and ends: every message succeeded in every group; every
 * extra success follows a kill or a lost lease; per key, no message started
 * before the one ahead of it had succeeded; no group ever had more than
 * maxInFlight (8) handlers running; and nothing is left pending, leased or
 * dead. Everything the test opens is closed on the failure path too.
 * FERRY_TEST_CHAOS_FAIL=1 makes it fail after its first kill, to check that
 * a failing run leaves no process or connection behind.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import { createStoreQueue } from '../../src/queue/engine.js';
import { sleep, counts } from '../stores/helpers.js';
import { checkGroup, type Line } from './chaos-check.js';
import { POSTGRES_SKIP, POSTGRES_URL, dropSchema, testSchema } from '../stores/postgres-env.js';
import { spawnTsx } from '../helpers/children.js';
import { LONG } from '../helpers/long.js';

const here = dirname(fileURLToPath(import.meta.url));
const MESSAGES = LONG ? 5000 : 1500;
const KEYS = LONG ? 1000 : 300;
/** Mid-run kills in CI, one as each fifth of the work is done. */
const KILLS = 4;
const GROUPS = ['ga', 'gb'];
const MAX_IN_FLIGHT = 8;
const FAIL = process.env.FERRY_TEST_CHAOS_FAIL === '1';

describe('postgres store under SIGKILL', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('chaos');
  const dir = mkdtempSync(join(tmpdir(), 'ferry-pg-chaos-'));
  after(async () => {
    await dropSchema(schema);
    rmSync(dir, { recursive: true, force: true });
  });

  // The timeout only catches a hang: the CI run takes well under a minute unloaded.
  it(`4 workers in 2 groups, ${LONG ? 'one killed every 2 s' : `${KILLS} killed mid-run`}: complete, ordered per key, capped, duplicates explained`, { timeout: 900_000 }, async (t) => {
    const store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema });
    const producer = createStoreQueue(store, { onError: () => undefined });
    const workers: Array<{ name: string; group: string; child: ChildProcess }> = [];
    const kills = new Map<string, number>(); // worker → when it was killed
    const kill = async (w: { name: string; child: ChildProcess }) => {
      if (w.child.exitCode === null && w.child.signalCode === null) {
        const exited = new Promise((resolve) => w.child.once('exit', resolve));
        w.child.kill('SIGKILL');
        await exited;
      }
      kills.set(w.name, Date.now());
    };
    try {
      for (const g of GROUPS) await store.ensureGroup('chaos', g, 'latest');
      for (let i = 0; i < MESSAGES; i += 100) {
        await producer.publish(
          ...Array.from({ length: 100 }, (_, j) => ({ topic: 'chaos', id: `m${i + j}`, key: `k${(i + j) % KEYS}`, payload: new TextEncoder().encode(String(i + j)) })),
        );
      }

      let next = 0;
      const start = (group: string) => {
        const name = `w${next++}`;
        const child = spawnTsx(join(here, 'fixtures', 'pg-chaos-worker.ts'), [POSTGRES_URL, schema, group, join(dir, `${name}.log`), name], {
          stdio: ['ignore', 'ignore', 'inherit'],
        });
        workers.push({ name, group, child });
      };
      for (const g of GROUPS) for (let i = 0; i < 2; i++) start(g);

      const remaining = async () => {
        let n = 0;
        for (const g of GROUPS) {
          const s = await store.stats('chaos', g);
          n += s.pending + s.leased + s.dead;
        }
        return n;
      };
      const total = MESSAGES * GROUPS.length;
      let killed = 0;
      let lastKill = Date.now();
      for (;;) {
        if (t.signal.aborted) throw new Error('the test was cancelled (timed out): the workers never finished');
        const left = await remaining();
        if (left === 0) break;
        // CI: a kill as each fifth of the work is done. Long: one every 2 s.
        const due = LONG ? Date.now() - lastKill >= 2000 : killed < KILLS && left <= total - ((killed + 1) * total) / (KILLS + 1);
        if (due) {
          const victim = workers.splice(Math.floor(Math.random() * workers.length), 1)[0]!;
          await kill(victim);
          killed++;
          lastKill = Date.now();
          start(victim.group);
          if (FAIL) assert.fail('FERRY_TEST_CHAOS_FAIL=1: failing on purpose after a kill');
        }
        await sleep(100);
      }
      for (const w of workers.splice(0)) await kill(w);
      if (!LONG) assert.equal(killed, KILLS, `a worker was killed at each fifth of the work`);
      assert.ok(killed >= 3, `only ${killed} workers were killed mid-run`);
      for (const g of GROUPS) assert.deepEqual(counts(await store.stats('chaos', g)), { pending: 0, leased: 0, dead: 0 }, g);
    } finally {
      for (const w of workers.splice(0)) await kill(w);
      await producer.close();
      await store.close();
    }

    const lines: Line[] = readdirSync(dir)
      .flatMap((f) => readFileSync(join(dir, f), 'utf8').split('\n'))
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Line);

    for (const g of GROUPS) {
      // Every message succeeded, duplicates follow a kill or a lost lease, per-key order held, the cap held.
      const { runs, duplicates, peak } = checkGroup(lines, kills, g, MESSAGES, MAX_IN_FLIGHT);
      assert.ok(peak >= 2, `${g}: handlers never overlapped (peak ${peak}), the cap was not exercised`);
      process.stdout.write(`# ${g}: ${runs} runs, ${duplicates} duplicate successes, peak ${peak} in flight\n`);
    }
  });
});
