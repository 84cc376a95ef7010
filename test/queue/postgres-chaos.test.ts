/**
 * The multi-instance proof on real processes: 4 worker processes in 2 groups
 * consume 5,000 messages over 1,000 keys while a random worker is SIGKILLed
 * every 2 s and replaced. From the workers' logs of handler starts and ends:
 * every message succeeded in every group; every extra success follows a kill
 * or a lost lease; per key, no message started before the one ahead of it had
 * succeeded; no group ever had more than maxInFlight (8) handlers running;
 * and nothing is left pending, leased or dead.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
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

const here = dirname(fileURLToPath(import.meta.url));
const MESSAGES = 5000;
const KEYS = 1000;
const GROUPS = ['ga', 'gb'];
const MAX_IN_FLIGHT = 8;


describe('postgres store under SIGKILL', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('chaos');
  const dir = mkdtempSync(join(tmpdir(), 'ferry-pg-chaos-'));
  const children = new Set<ChildProcess>();
  after(async () => {
    for (const c of children) c.kill('SIGKILL');
    await dropSchema(schema);
    rmSync(dir, { recursive: true, force: true });
  });

  it('4 workers in 2 groups, one killed every 2 s: complete, ordered per key, capped, duplicates explained', { timeout: 240_000 }, async () => {
    const store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema });
    for (const g of GROUPS) await store.ensureGroup('chaos', g, 'latest');
    const producer = createStoreQueue(store, { onError: () => undefined });
    for (let i = 0; i < MESSAGES; i += 100) {
      await producer.publish(
        ...Array.from({ length: 100 }, (_, j) => ({ topic: 'chaos', id: `m${i + j}`, key: `k${(i + j) % KEYS}`, payload: new TextEncoder().encode(String(i + j)) })),
      );
    }

    let next = 0;
    const kills = new Map<string, number>(); // worker → when it was killed
    const workers: Array<{ name: string; group: string; child: ChildProcess }> = [];
    const start = (group: string) => {
      const name = `w${next++}`;
      const child = spawn(process.execPath, ['--import', 'tsx', join(here, 'fixtures', 'pg-chaos-worker.ts'), POSTGRES_URL, schema, group, join(dir, `${name}.log`), name], {
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      children.add(child);
      child.on('exit', () => children.delete(child));
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
    const deadline = Date.now() + 200_000;
    while ((await remaining()) > 0) {
      assert.ok(Date.now() < deadline, 'the workers did not finish in time');
      await sleep(2000);
      if ((await remaining()) === 0) break;
      const victim = workers.splice(Math.floor(Math.random() * workers.length), 1)[0]!;
      const exited = new Promise((resolve) => victim.child.once('exit', resolve));
      victim.child.kill('SIGKILL');
      await exited;
      kills.set(victim.name, Date.now());
      start(victim.group);
    }
    for (const w of workers) {
      const exited = new Promise((resolve) => w.child.once('exit', resolve));
      w.child.kill('SIGKILL');
      await exited;
      kills.set(w.name, Date.now());
    }
    assert.ok(kills.size >= 4 + 3, `only ${kills.size - 4} workers were killed mid-run`);
    for (const g of GROUPS) assert.deepEqual(counts(await store.stats('chaos', g)), { pending: 0, leased: 0, dead: 0 }, g);
    await producer.close();

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
