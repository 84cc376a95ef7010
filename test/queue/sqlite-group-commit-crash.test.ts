/**
 * Group commit keeps publish durable: a process killed with SIGKILL right
 * after its concurrent publishes resolved loses none of them.
 */
import assert from 'node:assert/strict';
import { spawnChild } from '../helpers/children.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { SqliteStore } from '../../src/queue/stores/sqlite/store.js';

const here = dirname(fileURLToPath(import.meta.url));

it('every publish that resolved before SIGKILL is in the database after reopening (64 concurrent producers)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ferry-gc-crash-'));
  try {
    const path = join(dir, 'q.db');
    const setup = await SqliteStore.open({ path });
    await setup.ensureGroup('t', 'g', 'latest');
    await setup.close();

    const child = spawnChild(process.execPath, ['--import', 'tsx', join(here, 'fixtures', 'sqlite-publisher.ts'), path], { stdio: ['ignore', 'pipe', 'inherit'] });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
    const resolved: string[] = [];
    for await (const line of createInterface({ input: child.stdout! })) {
      if (line === 'ready') continue;
      resolved.push(line);
      if (resolved.length >= 600) break;
    }
    child.kill('SIGKILL');
    assert.equal(await exited, 'SIGKILL');

    const s = await SqliteStore.open({ path });
    const stored = new Set((await s.claim({ topic: 't', group: 'g', runnerId: 'check', max: 1_000_000, leaseMs: 60_000, maxInFlight: 0 })).map((c) => c.message.id));
    await s.close();
    const lost = resolved.filter((id) => !stored.has(id));
    assert.deepEqual(lost, [], `${lost.length} of ${resolved.length} resolved publishes missing`);
    assert.ok(stored.size >= resolved.length);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
