/**
 * The ClickHouse server the tests use: FERRY_TEST_CLICKHOUSE_URL, by default
 * http://127.0.0.1:18123 (.ci/run starts one there). When nothing answers
 * there and `clickhouse-server` is installed, this process starts a private
 * server on a free port under a temp dir (in /dev/shm when there is one) and kills it on exit. When neither
 * works the ClickHouse suites are skipped with one line saying why; under
 * CI=true that is a failure instead. Each harness gets a database of its own,
 * dropped in `cleanup`, and one `ProcessLocker` shared by its handles (the
 * distributed locker every instance would share).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ProcessLocker } from '../../src/queue/lockers/process.js';
import type { DistributedLocker } from '../../src/queue/lockers/types.js';
import { ClickHouseStore } from '../../src/queue/stores/clickhouse/store.js';
import type { Store } from '../../src/queue/types.js';
import { CLICKHOUSE_BINARY, answers, freePort, scratchRoot, startServer } from '../helpers/clickhouse-server.js';
import { reapWithParent } from '../helpers/children.js';
import type { StoreFactory, StoreHarness } from './factories.js';

async function findServer(): Promise<{ url?: string; why?: string }> {
  const shared = process.env.FERRY_TEST_CLICKHOUSE_URL || 'http://127.0.0.1:18123';
  if (await answers(shared)) return { url: shared };
  if (!CLICKHOUSE_BINARY) return { why: `ClickHouse at ${shared} is unreachable and clickhouse-server is not installed; set FERRY_TEST_CLICKHOUSE_URL` };
  const dir = mkdtempSync(join(scratchRoot(), 'ferry-ch-'));
  try {
    const { url, child } = await startServer(dir, await freePort());
    reapWithParent(child.pid); // a test process killed by the runner never reaches its 'exit'
    process.once('exit', () => {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    });
    child.unref();
    return { url };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    return { why: `ClickHouse at ${shared} is unreachable and a private server failed to start (${(err as Error).message})` };
  }
}

const found = await findServer();
if (found.why && process.env.CI === 'true') throw new Error(`CI=true: ${found.why}`);
/** Why the ClickHouse tests cannot run here, or undefined when they can. */
export const CLICKHOUSE_SKIP = found.why ? `skipped: ${found.why}` : undefined;
/** The server's HTTP endpoint (when not skipped). */
export const CLICKHOUSE_URL = found.url ?? '';

let counter = 0;
/** A database name no other test file or run uses at the same time. */
export function testDatabase(tag = 't'): string {
  return `ferry_${tag}_${process.pid}_${++counter}_${Math.random().toString(36).slice(2, 8)}`;
}

/**
 * Runs one statement on the test server outside any store (drops,
 * inspection). A request sent on a kept-alive socket the server had just
 * closed (it closes idle ones after a few seconds; a loaded machine hits that
 * window) fails before the server read it, so it is sent again, up to 3 times.
 */
export async function adminQuery(sql: string): Promise<string> {
  for (let tries = 1; ; tries++) {
    let res: Response;
    try {
      res = await fetch(`${CLICKHOUSE_URL}/`, { method: 'POST', body: sql });
    } catch (err) {
      const code = ((err as { cause?: { code?: string } }).cause)?.code;
      if (tries < 3 && (code === 'UND_ERR_SOCKET' || code === 'ECONNRESET' || code === 'EPIPE')) continue;
      throw err;
    }
    const text = await res.text();
    if (!res.ok) throw new Error(`clickhouse: ${text}`);
    return text;
  }
}

export async function dropDatabase(db: string): Promise<void> {
  await adminQuery(`DROP DATABASE IF EXISTS \`${db}\``);
}

/** A harness whose handles share `locker` (default: a new ProcessLocker per harness). */
export function clickhouseFactoryWith(name: string, makeLocker: () => Promise<DistributedLocker> | DistributedLocker = () => new ProcessLocker()): StoreFactory {
  return {
    name,
    slowness: 5,
    ...(CLICKHOUSE_SKIP ? { skip: CLICKHOUSE_SKIP } : {}),
    async create(): Promise<StoreHarness> {
      const database = testDatabase();
      const locker = await makeLocker();
      const opened: Store[] = [];
      return {
        async open() {
          const s = await ClickHouseStore.open({ url: CLICKHOUSE_URL, database, locker });
          opened.push(s);
          return s;
        },
        async cleanup() {
          for (const s of opened) await s.close().catch(() => undefined);
          await dropDatabase(database);
        },
      };
    },
  };
}

export const clickhouseFactory: StoreFactory = clickhouseFactoryWith('clickhouse');
