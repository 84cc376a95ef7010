/**
 * Schedules on real processes: 4 instances on one Postgres schema fire a
 * one-second schedule for about 30 s; one of them is SIGKILLed a third of
 * the way in and a new one started 5 s later. From the stored messages
 * alone (their tick headers and IDs, not the time anything took): every
 * tick from the first after the schedule was stored to the last is there
 * exactly once, with the ID derived from the schedule and the tick. Three
 * instances ran throughout, so no tick was missed: `catchUp` allows no gap
 * here. Every child is killed on the failure path too (children.ts).
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { HEADER_SCHEDULE, HEADER_SCHEDULE_TICK, scheduleTickId } from '../../src/queue/schedules/tick-message.js';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import type { StoredMessage } from '../../src/queue/types.js';
import { spawnTsx } from '../helpers/children.js';
import { orHang, sleep } from '../stores/helpers.js';
import { POSTGRES_SKIP, POSTGRES_URL, dropSchema, testSchema } from '../stores/postgres-env.js';

const here = dirname(fileURLToPath(import.meta.url));
const RUN_MS = 30_000;

describe('schedules across processes', { skip: POSTGRES_SKIP }, () => {
  const schema = testSchema('sched');
  after(() => dropSchema(schema));

  it('4 processes, one SIGKILLed and restarted: each tick of a 1-second schedule stored once, none missing', { timeout: 600_000 }, async () => {
    const store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema });
    const running = new Map<string, ChildProcess>();
    const start = async (name: string) => {
      const child = spawnTsx(join(here, 'fixtures', 'pg-schedule-worker.ts'), [POSTGRES_URL, schema, name], { stdio: ['pipe', 'pipe', 'inherit'] });
      running.set(name, child);
      let out = '';
      child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
      await orHang(
        new Promise<void>((resolve, reject) => {
          child.stdout!.on('data', () => out.includes('ready\n') && resolve());
          child.once('exit', (code) => reject(new Error(`${name} exited (${code}) before it was ready`)));
        }),
        `${name} to start`,
      );
    };
    try {
      await Promise.all(['w0', 'w1', 'w2', 'w3'].map(start));
      const t0 = Date.now();
      await sleep(RUN_MS / 3);
      const victim = running.get('w2')!;
      running.delete('w2');
      victim.kill('SIGKILL');
      await once(victim, 'exit');
      const killedAt = Date.now();
      await sleep(5000);
      await start('w4');
      const restartedAt = Date.now();
      await sleep(Math.max(0, t0 + RUN_MS - Date.now()));
      // A clean stop: each closes its queue and exits 0.
      await orHang(
        Promise.all(
          [...running.values()].map(async (c) => {
            const exited = once(c, 'exit');
            c.stdin!.end();
            assert.deepEqual(await exited, [0, null]);
          }),
        ),
        'the instances to close',
      );
      running.clear();

      const msgs: StoredMessage[] = [];
      for (let after: string | undefined, first = true; first || after !== undefined; first = false) {
        const page = await store.listMessages('beats', after === undefined ? { limit: 1000 } : { after, limit: 1000 });
        msgs.push(...page.messages);
        after = page.next;
      }
      const ticks = msgs.map((m) => Date.parse(m.headers![HEADER_SCHEDULE_TICK]!)).sort((a, b) => a - b);
      for (const m of msgs) {
        assert.equal(m.headers![HEADER_SCHEDULE], 'beat');
        assert.equal(m.id, scheduleTickId('beat', new Date(m.headers![HEADER_SCHEDULE_TICK]!)));
      }
      assert.equal(new Set(ticks).size, ticks.length, 'one message per tick');
      const gaps = ticks.slice(1).flatMap((t, i) => (t - ticks[i]! === 1000 ? [] : [`${new Date(ticks[i]!).toISOString()} → ${new Date(t).toISOString()}`]));
      assert.deepEqual(gaps, [], 'consecutive ticks one second apart');
      const [beat] = await store.listSchedules();
      assert.equal(ticks[0], Math.floor(beat!.updatedAt.getTime() / 1000) * 1000 + 1000, 'the first tick after the schedule was stored');
      assert.ok(ticks.some((t) => t > killedAt && t < restartedAt), 'ticks while one instance was dead');
      assert.ok(ticks[ticks.length - 1]! >= restartedAt, 'ticks after the restart');
      assert.ok(ticks.length >= 20, `${ticks.length} ticks`);
      process.stdout.write(`${ticks.length} ticks from ${new Date(ticks[0]!).toISOString()} to ${new Date(ticks[ticks.length - 1]!).toISOString()}\n`);
    } finally {
      for (const c of running.values()) c.kill('SIGKILL');
      await store.close();
    }
  });
});
