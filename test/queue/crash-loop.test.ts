/**
 * A crash loop takes down only the message that causes it. One message among
 * 100 crashes its worker process whenever its handler runs; the worker is
 * restarted after each crash. The deliveries claimed in the same batch as
 * the poison one, whose handlers never ran, must not spend their attempts on
 * those crashes: exactly the poison message is dead-lettered (after
 * `maxAttempts` runs) and the other 100 are handled. On SQLite, Postgres and
 * the nats queue (where JetStream charges every hand-out, so ferry counts
 * handler starts in its attempt ledger).
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawnChild } from '../helpers/children.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { HEADER_DLQ_MESSAGE_ID } from '../../src/queue/dead-letter.js';
import { SqliteStore } from '../../src/queue/stores/sqlite/store.js';
import { PostgresStore } from '../../src/queue/stores/postgres/store.js';
import type { MessagePage, QueueStats, Store } from '../../src/queue/types.js';
import { NATS_SKIP, NATS_URL, deleteStreams, openTestNatsQueue, testPrefix } from '../stores/nats-env.js';
import { POSTGRES_SKIP, POSTGRES_URL, dropSchema, testSchema } from '../stores/postgres-env.js';

/** What the test reads of a store, or of a queue that has none. */
interface Watched {
  stats(topic: string, group: string): Promise<Pick<QueueStats, 'pending' | 'leased' | 'dead'>>;
  listMessages?(topic: string, opts: { limit: number }): Promise<MessagePage>;
}

const here = dirname(fileURLToPath(import.meta.url));
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
/** Restarts allowed before the test calls it a loop that never ends. */
const MAX_RESTARTS = 12;

const children = new Set<ChildProcess>();
after(() => {
  for (const c of children) c.kill('SIGKILL');
});

/** Runs the worker until the group is drained, restarting it whenever it crashes; resolves with the number of crashes. */
async function runUntilDrained(store: Watched, args: string[]): Promise<number> {
  let crashes = 0;
  for (;;) {
    const child = spawnChild(process.execPath, ['--import', 'tsx', join(here, 'fixtures', 'crash-loop-worker.ts'), ...args], { stdio: ['ignore', 'ignore', 'inherit'] });
    children.add(child);
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    let code: number | null | undefined;
    void exited.then((c) => (code = c));
    try {
      while (code === undefined) {
        const s = await store.stats('t', 'g');
        if (s.pending === 0 && s.leased === 0) return crashes;
        await sleep(100);
      }
    } finally {
      if (code === undefined) {
        child.kill('SIGKILL');
        await exited;
      }
      children.delete(child);
    }
    assert.equal(code, 1, 'the worker exits only by the poison message\'s crash');
    crashes++;
    assert.ok(crashes <= MAX_RESTARTS, `still crashing after ${crashes} restarts`);
  }
}

const messages = () => Array.from({ length: 101 }, (_, i) => ({
  id: `m${String(i).padStart(3, '0')}`, topic: 't', payload: new TextEncoder().encode(i === 2 ? 'poison' : `ok ${i}`), publishedAt: new Date(),
}));

async function check(store: Store, args: string[]): Promise<void> {
  await store.ensureGroup('t', 'g', 'latest');
  await store.append(messages());
  await expectOnlyPoisonDead(store, args);
}

async function expectOnlyPoisonDead(store: Watched, args: string[]): Promise<void> {
  const crashes = await runUntilDrained(store, args);
  const stats = await store.stats('t', 'g');
  assert.deepEqual({ pending: stats.pending, leased: stats.leased, dead: stats.dead }, { pending: 0, leased: 0, dead: 1 });
  const page = await store.listMessages!('dlq', { limit: 10 });
  assert.deepEqual(page.messages.map((m) => m.headers?.[HEADER_DLQ_MESSAGE_ID]), ['m002'], 'only the poison message is dead');
  assert.equal(crashes, 3, 'the poison message ran maxAttempts (3) times');
}

describe('a crash loop takes down only the message that causes it', () => {
  it('sqlite', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ferry-crash-loop-'));
    const path = join(dir, 'q.db');
    const store = await SqliteStore.open({ path });
    try {
      await check(store, ['sqlite', path]);
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('postgres', { skip: POSTGRES_SKIP }, async () => {
    const schema = testSchema('crash');
    const store = await PostgresStore.open({ connectionString: POSTGRES_URL, schema });
    try {
      await check(store, ['postgres', POSTGRES_URL, schema]);
    } finally {
      await store.close();
      await dropSchema(schema);
    }
  });
});

describe('a crash loop on the nats queue takes down only the message that causes it', () => {
  it('nats', { skip: NATS_SKIP }, async () => {
    const prefix = testPrefix();
    const q = await openTestNatsQueue(prefix);
    try {
      // The group's consumer exists before the messages (a subscription that closes at once makes it).
      await (await q.subscribe('t', 'g', async () => undefined, { startFrom: 'earliest' })).close();
      await q.publish(...messages().map(({ id, topic, payload }) => ({ id, topic, payload })));
      await expectOnlyPoisonDead(q, ['nats', NATS_URL, prefix]);
    } finally {
      await q.close();
      await deleteStreams(prefix).catch(() => undefined);
    }
  });
});
