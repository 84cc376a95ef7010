/**
 * The dashboard's pause and resume endpoints without a browser: what a
 * change does to the group and to the sample the page reads, the CSRF and
 * access checks redrive has, 404 for a group that is not registered, 501
 * for a store that keeps no pause state, and every change run at once.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createQueue, createStoreQueue, type Queue, type Store } from '../../src/queue/index.js';
import { MemoryStore } from '../../src/queue/stores/memory.js';
import { startDashboard, type Dashboard } from '../../src/dashboard/server.js';

const work = await mkdtemp(join(tmpdir(), 'ferry-dashboard-pause-'));
after(() => rm(work, { recursive: true, force: true }));

type Answer = { status: number; body: Record<string, unknown> };
type Row = { topic: string; group: string; paused: boolean | null; pending: number };

async function csrfOf(d: Dashboard, headers: Record<string, string> = {}): Promise<string> {
  const html = await (await fetch(d.url, { headers })).text();
  return /name="csrf-token" content="([0-9a-f]{64})"/.exec(html)![1]!;
}

async function post(d: Dashboard, path: string, body: unknown, headers: Record<string, string>): Promise<Answer> {
  const res = await fetch(new URL(path, d.url), { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    parsed = { text };
  }
  return { status: res.status, body: parsed };
}

async function overview(d: Dashboard, headers: Record<string, string> = {}): Promise<{ groups: Row[]; features: Record<string, boolean> }> {
  return (await (await fetch(new URL('/api/overview', d.url), { headers })).json()) as { groups: Row[]; features: Record<string, boolean> };
}

/** A SQLite queue (the dashboard's usual) with `groups` registered on topic `jobs`. */
async function sqliteQueue(name: string, groups: string[]): Promise<Queue> {
  const queue = (await createQueue({ enabled: true, type: 'sqlite', config: { path: join(work, `${name}.db`) } }, { fireSchedules: false }))!;
  for (const g of groups) {
    const sub = await queue.subscribe('jobs', g, async () => {});
    await sub.close();
  }
  return queue;
}

test('pause and resume change the group in the store, and the answer comes once the page\'s sample shows it', { timeout: 120_000 }, async () => {
  const queue = await sqliteQueue('state', ['w']);
  // A long refresh: a sample that shows the change can only come from the action itself.
  const d = await startDashboard({ queue, refreshMs: 3_600_000 });
  try {
    const csrf = await csrfOf(d);
    assert.equal((await overview(d)).groups[0]!.paused, false);
    assert.equal((await overview(d)).features.pause, true);

    const paused = await post(d, '/api/pause-group', { topic: 'jobs', group: 'w' }, { 'x-csrf-token': csrf });
    assert.equal(paused.status, 200, JSON.stringify(paused.body));
    assert.deepEqual(paused.body, { topic: 'jobs', group: 'w', paused: true });
    assert.equal((await queue.stats('jobs', 'w')).paused, true);
    assert.equal((await overview(d)).groups[0]!.paused, true);

    const resumed = await post(d, '/api/resume-group', { topic: 'jobs', group: 'w' }, { 'x-csrf-token': csrf });
    assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
    assert.deepEqual(resumed.body, { topic: 'jobs', group: 'w', paused: false });
    assert.equal((await queue.stats('jobs', 'w')).paused, false);
    assert.equal((await overview(d)).groups[0]!.paused, false);
  } finally {
    await d.close();
    await queue.close();
  }
});

test('a group that is not registered is 404, and nothing is registered', { timeout: 120_000 }, async () => {
  const queue = await sqliteQueue('unknown', ['w']);
  const d = await startDashboard({ queue });
  try {
    const csrf = await csrfOf(d);
    for (const path of ['/api/pause-group', '/api/resume-group', '/api/remove-group']) {
      const res = await post(d, path, { topic: 'jobs', group: 'nobody' }, { 'x-csrf-token': csrf });
      assert.equal(res.status, 404, `${path}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.error, 'no group nobody on topic jobs');
    }
    assert.deepEqual(await queue.listGroups(), [{ topic: 'jobs', group: 'w' }]);
  } finally {
    await d.close();
    await queue.close();
  }
});

test('pause and resume need what redrive needs: the access token, the CSRF token, no foreign Origin, a JSON body, valid names', { timeout: 120_000 }, async () => {
  const queue = await sqliteQueue('guards', ['w']);
  const token = 'pause-token-0123';
  const d = await startDashboard({ queue, token });
  const auth = { authorization: `Bearer ${token}` };
  try {
    const csrf = await csrfOf(d, auth);
    const own = new URL(d.url).origin;
    const body = { topic: 'jobs', group: 'w' };
    for (const path of ['/api/pause-group', '/api/resume-group']) {
      const noToken = await post(d, path, body, { 'x-csrf-token': csrf });
      assert.equal(noToken.status, 401, `${path} without the access token`);
      const noCsrf = await post(d, path, body, auth);
      assert.equal(noCsrf.status, 403);
      assert.match(String(noCsrf.body.error), /missing CSRF token/);
      const wrong = await post(d, path, body, { ...auth, 'x-csrf-token': 'a'.repeat(64) });
      assert.equal(wrong.status, 403);
      assert.match(String(wrong.body.error), /wrong CSRF token/);
      const foreign = await post(d, path, body, { ...auth, 'x-csrf-token': csrf, origin: 'http://evil.example' });
      assert.equal(foreign.status, 403);
      assert.match(String(foreign.body.error), /Origin "http:\/\/evil\.example" refused/);
      const nullOrigin = await post(d, path, body, { ...auth, 'x-csrf-token': csrf, origin: 'null' });
      assert.equal(nullOrigin.status, 403);
      const form = await fetch(new URL(path, d.url), { method: 'POST', headers: { ...auth, 'x-csrf-token': csrf, 'content-type': 'application/x-www-form-urlencoded' }, body: 'topic=jobs&group=w' });
      assert.equal(form.status, 415);
      assert.equal((await post(d, path, { topic: 'jobs', group: 'a/b' }, { ...auth, 'x-csrf-token': csrf })).status, 400);
      assert.equal((await post(d, path, { topic: 'jobs' }, { ...auth, 'x-csrf-token': csrf })).status, 400);
      assert.equal((await post(d, path, '{', { ...auth, 'x-csrf-token': csrf })).status, 400);
      assert.equal((await fetch(new URL(path, d.url), { headers: auth })).status, 404, 'a GET changes nothing');
      // The same request from the dashboard's own origin is accepted.
      const ok = await post(d, path, body, { ...auth, 'x-csrf-token': csrf, origin: own });
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
      assert.equal((await queue.stats('jobs', 'w')).paused, path === '/api/pause-group');
    }
  } finally {
    await d.close();
    await queue.close();
  }
});

/** A memory store without `setGroupPaused`: a store that keeps no pause state. */
function storeWithoutPause(): Store {
  const inner = new MemoryStore();
  return new Proxy(inner, {
    get(target, key) {
      if (key === 'setGroupPaused') return undefined;
      const v = Reflect.get(target, key, target) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  }) as Store;
}

test('a store that keeps no pause state: 501 with ERR_UNSUPPORTED, and the page stops offering Pause', { timeout: 120_000 }, async () => {
  const queue = createStoreQueue(storeWithoutPause());
  const sub = await queue.subscribe('jobs', 'w', async () => {});
  await sub.close();
  const d = await startDashboard({ queue });
  try {
    const csrf = await csrfOf(d);
    assert.equal((await overview(d)).features.pause, true, 'offered until the store refuses');
    const res = await post(d, '/api/pause-group', { topic: 'jobs', group: 'w' }, { 'x-csrf-token': csrf });
    assert.equal(res.status, 501);
    assert.equal(res.body.code, 'ERR_UNSUPPORTED');
    assert.match(String(res.body.error), /^cannot pause group w: .*setGroupPaused/);
    assert.equal((await overview(d)).features.pause, false);
    const again = await post(d, '/api/resume-group', { topic: 'jobs', group: 'w' }, { 'x-csrf-token': csrf });
    assert.equal(again.status, 501);
    assert.equal(again.body.code, 'ERR_UNSUPPORTED');
    assert.equal((await queue.stats('jobs', 'w')).paused, false);
  } finally {
    await d.close();
    await queue.close();
  }
});

test('at once: pause, resume, remove-group, redrive and overview; then pause and resume of one group', { timeout: 120_000 }, async () => {
  const queue = await sqliteQueue('together', ['a', 'b', 'c', 'd']);
  await queue.pauseGroup('jobs', 'b');
  const d = await startDashboard({ queue, refreshMs: 100 });
  try {
    const csrf = await csrfOf(d);
    const h = { 'x-csrf-token': csrf };
    const answers = await Promise.all([
      post(d, '/api/pause-group', { topic: 'jobs', group: 'a' }, h),
      post(d, '/api/resume-group', { topic: 'jobs', group: 'b' }, h),
      post(d, '/api/remove-group', { topic: 'jobs', group: 'c' }, h),
      post(d, '/api/redrive', { topic: 'jobs.dlq', ids: 'all' }, h),
      post(d, '/api/pause-group', { topic: 'jobs', group: 'c' }, h).then((r) => r.status),
      overview(d).then(() => 200),
    ]);
    assert.deepEqual(
      answers.slice(0, 4).map((r) => (r as Answer).status),
      [200, 200, 200, 200],
    );
    assert.ok([200, 404].includes(answers[4] as number), 'pausing a group being removed: paused first (200) or gone (404)');
    const want = async (g: string) => (await queue.stats('jobs', g)).paused;
    assert.deepEqual(await queue.listGroups('jobs'), ['a', 'b', 'd'].map((group) => ({ topic: 'jobs', group })));
    assert.deepEqual([await want('a'), await want('b'), await want('d')], [true, false, false]);

    // Pause and resume of one group at once: both answer 200, and the page agrees with the store afterwards.
    const both = await Promise.all([post(d, '/api/pause-group', { topic: 'jobs', group: 'd' }, h), post(d, '/api/resume-group', { topic: 'jobs', group: 'd' }, h)]);
    assert.deepEqual(
      both.map((r) => r.status),
      [200, 200],
    );
    const rows = (await (async () => {
      // A sample begun after both answered.
      await post(d, '/api/resume-group', { topic: 'jobs', group: 'a' }, h);
      return (await overview(d)).groups;
    })()) as Row[];
    const shown = Object.fromEntries(rows.map((r) => [r.group, r.paused]));
    assert.deepEqual(shown, { a: false, b: false, d: await want('d') });
  } finally {
    await d.close();
    await queue.close();
  }
});
