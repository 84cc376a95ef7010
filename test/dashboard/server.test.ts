/**
 * The dashboard server without a browser: option checks, the directory view,
 * the API's input checks, and actions run at once.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, open, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'node:http';
import { DiskQueue, LockedError } from '../../src/diskqueue/index.js';
import { CorruptError, InvalidArgumentError } from '../../src/errors.js';
import { createQueue, permanent, type Queue } from '../../src/queue/index.js';
import { startDashboard, type Dashboard } from '../../src/dashboard/server.js';
import { ferry } from '../cli/helpers.js';
import { waitFor } from '../stores/helpers.js';

const work = await mkdtemp(join(tmpdir(), 'ferry-dashboard-server-'));
after(() => rm(work, { recursive: true, force: true }));

/** The CSRF token of a dashboard's page. */
async function csrfOf(d: Dashboard, headers: Record<string, string> = {}): Promise<string> {
  const html = await (await fetch(d.url, { headers })).text();
  return /name="csrf-token" content="([0-9a-f]{64})"/.exec(html)![1]!;
}

async function post(d: Dashboard, path: string, value: unknown, csrf: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(new URL(path, d.url), { method: 'POST', headers: { 'content-type': 'application/json', 'x-csrf-token': csrf }, body: JSON.stringify(value) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

test('options: one source, a token for a non-loopback bind, sane numbers', async () => {
  const queue = (await createQueue({ enabled: true, type: 'memory' }))!;
  try {
    await assert.rejects(startDashboard({}), InvalidArgumentError);
    await assert.rejects(startDashboard({ queue, dir: work }), InvalidArgumentError);
    await assert.rejects(startDashboard({ queue, host: '0.0.0.0' }), /requires a token/);
    await assert.rejects(startDashboard({ queue, token: 'short' }), /at least 8/);
    await assert.rejects(startDashboard({ queue, token: '        ' }), /whitespace/);
    await assert.rejects(startDashboard({ queue, port: 70000 }), InvalidArgumentError);
    await assert.rejects(startDashboard({ queue, deadLetterTopics: ['no spaces'] }), /characters outside/);
    // Misspelt or misplaced options were taken and ignored.
    const refused = (message: RegExp) => (e: unknown) => e instanceof InvalidArgumentError && message.test(e.message);
    await assert.rejects(startDashboard({ queue, refreshMS: 100 } as never), refused(/unknown dashboard option "refreshMS"/));
    await assert.rejects(startDashboard({ queue, deadLetterTopic: ['dlq'] } as never), refused(/unknown dashboard option "deadLetterTopic"/));
    await assert.rejects(startDashboard({ queue, deadLetterTopics: 'dlq' } as never), refused(/deadLetterTopics must be an array/));
    await assert.rejects(startDashboard({ dir: work, throughput: 'events' }), refused(/apply to a queue, not a directory/));
    await assert.rejects(startDashboard({ dir: work, deadLetterTopics: ['dlq'] }), refused(/apply to a queue, not a directory/));
    const cli = await ferry(['dashboard', '--dir', work, '--dead-letter-topic', 'dlq']);
    assert.equal(cli.code, 2, cli.stderr);
    assert.match(cli.stderr, /--dead-letter-topic applies to --queue, not --dir/);
  } finally {
    await queue.close();
  }
});

test('a request naming another Host is refused (DNS rebinding), even without a token', async () => {
  const queue = (await createQueue({ enabled: true, type: 'memory' }))!;
  const d = await startDashboard({ queue });
  try {
    assert.equal((await fetch(d.url)).status, 200);
    const status = await new Promise<number>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: d.port, path: '/api/overview', headers: { host: `attacker.example:${d.port}` } }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', reject);
      req.end();
    });
    assert.equal(status, 403);
    const page = await fetch(d.url);
    assert.match(page.headers.get('content-security-policy') ?? '', /script-src 'self'/);
    assert.equal(page.headers.get('x-frame-options'), 'DENY');
  } finally {
    await d.close();
    await queue.close();
  }
});

test('API input is checked: bad names, cursors, limits and bodies get 400', async () => {
  const queue = (await createQueue({ enabled: true, type: 'sqlite', config: { path: join(work, 'inputs.db') } }))!;
  const d = await startDashboard({ queue });
  try {
    const csrf = await csrfOf(d);
    const get = async (q: string) => (await fetch(new URL(`/api/dead-letters?${q}`, d.url))).status;
    assert.equal(await get('topic=dlq'), 200);
    assert.equal(await get('topic=a%20b'), 400);
    assert.equal(await get(''), 400);
    assert.equal(await get('topic=dlq&limit=0'), 400);
    assert.equal(await get('topic=dlq&limit=201'), 400);
    assert.equal(await get('topic=dlq&after=-1'), 400);
    assert.equal((await post(d, '/api/redrive', { topic: 'dlq', ids: [] }, csrf)).status, 400);
    assert.equal((await post(d, '/api/redrive', { topic: 'dlq', ids: [7] }, csrf)).status, 400);
    assert.equal((await post(d, '/api/redrive', { topic: 'dlq', ids: Array.from({ length: 201 }, (_, i) => `m${i}`) }, csrf)).status, 400);
    assert.equal((await post(d, '/api/remove-group', { topic: 't', group: 'a/b' }, csrf)).status, 400);
    assert.equal((await post(d, '/api/remove-group', [1], csrf)).status, 400);
    assert.equal((await fetch(new URL('/api/redrive', d.url), { method: 'POST', headers: { 'content-type': 'application/json', 'x-csrf-token': csrf }, body: '{' })).status, 400);
    assert.equal((await fetch(new URL('/api/overview', d.url), { method: 'DELETE' })).status, 405);
    assert.equal((await fetch(new URL('/../package.json', d.url))).status, 404);
  } finally {
    await d.close();
    await queue.close();
  }
});

test('paging through dead letters visits each once, in publish order', async () => {
  const queue: Queue = (await createQueue({ enabled: true, type: 'sqlite', config: { path: join(work, 'paging.db') } }))!;
  const sub = await queue.subscribe('jobs', 'w', async () => {
    throw permanent(new Error('no'));
  }, { deadLetterTopic: 'jobs.dlq', pollIntervalMs: 10 });
  const d = await startDashboard({ queue });
  try {
    for (let i = 0; i < 7; i++) await queue.publish({ topic: 'jobs', payload: Buffer.from(`job ${i}`) });
    const deadline = Date.now() + 10_000;
    while ((await queue.stats('jobs', 'w')).dead < 7) {
      assert.ok(Date.now() < deadline, 'dead-lettering timed out');
      await new Promise((r) => setTimeout(r, 20));
    }
    const seen: string[] = [];
    let after: string | null = null;
    for (let pages = 0; pages < 10; pages++) {
      const q = new URLSearchParams({ topic: 'jobs.dlq', limit: '3', ...(after !== null ? { after } : {}) });
      const page = (await (await fetch(new URL(`/api/dead-letters?${q}`, d.url))).json()) as { items: { preview: string }[]; next: string | null };
      seen.push(...page.items.map((m) => m.preview));
      after = page.next;
      if (after === null) break;
    }
    assert.deepEqual(seen, Array.from({ length: 7 }, (_, i) => `job ${i}`));
  } finally {
    await d.close();
    await sub.close();
    await queue.close();
  }
});

test('actions at once: the same redrive twice republishes once; redrives and a group removal run together', async () => {
  const queue: Queue = (await createQueue({ enabled: true, type: 'sqlite', config: { path: join(work, 'together.db') } }))!;
  let healed = false;
  const got: string[] = [];
  const sub = await queue.subscribe('jobs', 'w', async (m) => {
    if (!healed) throw permanent(new Error('no'));
    got.push(Buffer.from(m.payload).toString());
  }, { deadLetterTopic: 'jobs.dlq', pollIntervalMs: 10 });
  const idle = await queue.subscribe('jobs', 'idle', async () => {});
  await idle.close();
  const d = await startDashboard({ queue });
  try {
    await queue.publish({ topic: 'jobs', payload: Buffer.from('a') }, { topic: 'jobs', payload: Buffer.from('b') });
    const deadline = Date.now() + 10_000;
    while ((await queue.stats('jobs', 'w')).dead < 2) {
      assert.ok(Date.now() < deadline, 'dead-lettering timed out');
      await new Promise((r) => setTimeout(r, 20));
    }
    healed = true;
    const page = (await (await fetch(new URL('/api/dead-letters?topic=jobs.dlq', d.url))).json()) as { items: { id: string; preview: string }[] };
    const a = page.items.find((m) => m.preview === 'a')!.id;
    const csrf = await csrfOf(d);
    const [r1, r2, rm1, ov] = await Promise.all([
      post(d, '/api/redrive', { topic: 'jobs.dlq', ids: [a] }, csrf),
      post(d, '/api/redrive', { topic: 'jobs.dlq', ids: [a] }, csrf),
      post(d, '/api/remove-group', { topic: 'jobs', group: 'idle' }, csrf),
      fetch(new URL('/api/overview', d.url)),
    ]);
    assert.deepEqual([r1.status, r2.status, rm1.status, ov.status], [200, 200, 200, 200]);
    assert.deepEqual([r1.body.redriven, r2.body.redriven], [1, 1]);
    while (got.length < 1) {
      assert.ok(Date.now() < deadline, 'redelivery timed out');
      await new Promise((r) => setTimeout(r, 20));
    }
    await new Promise((r) => setTimeout(r, 200));
    assert.deepEqual(got, ['a'], 'redriven twice at once, delivered once; b stayed dead');
    assert.deepEqual(await queue.listGroups('jobs'), [{ topic: 'jobs', group: 'w' }]);
    // Removing a group that is gone says so, as pause does, and changes nothing.
    assert.equal((await post(d, '/api/remove-group', { topic: 'jobs', group: 'idle' }, csrf)).status, 404);
    assert.deepEqual(await queue.listGroups('jobs'), [{ topic: 'jobs', group: 'w' }]);
  } finally {
    await d.close();
    await sub.close();
    await queue.close();
  }
});

test('--dir: a directory deleted under the dashboard shows the error alone, not the last stats beside it', async () => {
  const dir = join(work, 'gone');
  const q = await DiskQueue.open(dir, { segmentSize: 4096 });
  await q.add(Buffer.from('x'));
  await q.close();
  const d = await startDashboard({ dir, refreshMs: 100 });
  type View = { dir: { stats: Record<string, number> | null; verify: unknown; error: string | null } };
  const view = async () => ((await (await fetch(new URL('/api/overview', d.url))).json()) as View).dir;
  try {
    assert.equal((await view()).stats?.backlog, 1);
    await rm(dir, { recursive: true, force: true });
    await waitFor(async () => /ENOENT/.test((await view()).error ?? ''), 120_000, 'a sample that finds the directory gone');
    const v = await view();
    assert.deepEqual([v.stats, v.verify], [null, null]);
  } finally {
    await d.close();
  }
});

test("--dir: a directory holding both formats' files shows the CLI's refusal alone, not one format's check passing", async () => {
  const dir = join(work, 'mixed');
  const q = await DiskQueue.open(dir, { segmentSize: 4096 });
  await q.add(Buffer.from('x'));
  await q.close();
  await writeFile(join(dir, 'cursor'), Buffer.alloc(24));
  await writeFile(join(dir, '00000000000000000001.seg'), Buffer.alloc(0));
  const d = await startDashboard({ dir, refreshMs: 100 });
  type View = { dir: { stats: unknown; verify: unknown; error: string | null } };
  try {
    const v = ((await (await fetch(new URL('/api/overview', d.url))).json()) as View).dir;
    assert.match(v.error ?? '', /holds both a DiskQueue \(data\.\d+\) and a spool \(00000000000000000001\.seg, cursor\); refusing to guess/);
    assert.deepEqual([v.stats, v.verify], [null, null]);
  } finally {
    await d.close();
  }
});

test('a request target the URL parser refuses, or one it reads as naming a host (//h/x, /\\h/x, http://h/x), is a 400, before and after the token', async () => {
  const d = await startDashboard({ dir: work, token: 'target-token-1' });
  try {
    const { port } = new URL(d.url);
    for (const target of ['//', '//?token=x', 'http://[', '//evil.example/api/overview', '//127.0.0.1/?token=target-token-1', '/\\evil.example/api/overview', 'http://evil.example/api/overview']) {
      const status = await new Promise<number>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, path: target, headers: { host: `127.0.0.1:${port}` } }, (res) => {
          res.resume();
          resolve(res.statusCode!);
        });
        req.on('error', reject);
        req.end();
      });
      assert.equal(status, 400, target);
    }
  } finally {
    await d.close();
  }
});

test('--dir: a DiskQueue\'s stats, segments and damage', async () => {
  const dir = join(work, 'dq');
  const q = await DiskQueue.open(dir, { segmentSize: 4096 });
  for (const w of ['alpha', 'bravo', 'charlie']) await q.add(Buffer.from(w));
  await q.close();
  const d = await startDashboard({ dir, refreshMs: 100 });
  type View = { dir: { at: number; format: string; locked: boolean; stats: Record<string, number> | null; verify: { ok: boolean; segments: number; records: number; damage: unknown[] } } };
  const view = async () => ((await (await fetch(new URL('/api/overview', d.url))).json()) as View).dir;
  try {
    const v = await view();
    assert.equal(v.format, 'diskqueue');
    assert.equal(v.locked, false);
    assert.equal(v.stats?.backlog, 3);
    assert.deepEqual([v.verify.ok, v.verify.segments, v.verify.records, v.verify.damage.length], [true, 1, 3, 0]);
    // A process holding the queue: shown as locked, not waited for.
    // Each look opens the directory for a moment, so this open can meet it: retry.
    let held: DiskQueue<Uint8Array> | undefined;
    await waitFor(async () => {
      held = await DiskQueue.open<Uint8Array>(dir, { segmentSize: 4096 }).catch((err: unknown) => {
        if (err instanceof LockedError) return undefined;
        throw err;
      });
      return held !== undefined;
    }, 120_000, 'an open between two looks');
    try {
      // The dashboard samples in the background: wait for a sample taken since.
      await waitFor(async () => (await view()).locked, 120_000, 'a sample that sees the lock');
    } finally {
      await held!.close();
    }
    // Damage: flip a byte inside bravo's payload (64-byte header, alpha takes 14 bytes).
    const seg = join(dir, 'data.00000001');
    const at = 64 + 14 + 2;
    const fh = await open(seg, 'r+');
    await fh.write(Buffer.from([(await readFile(seg))[at]! ^ 0xff]), 0, 1, at);
    await fh.close();
    await waitFor(async () => (await view()).verify?.ok === false, 120_000, 'a sample that sees the damage');
    const damaged = await view();
    assert.equal(damaged.verify.ok, false);
    assert.equal(damaged.verify.damage.length, 1);
    assert.equal(damaged.locked, false);
    assert.equal(damaged.stats, null, 'a damaged directory is not opened');
    // Looks after it leave the damage in place: opening would have cut it away.
    const seen = new Set<number>();
    await waitFor(async () => {
      const later = await view();
      assert.equal(later.verify.ok, false, 'the damage is still there at every later look');
      seen.add(later.at);
      return seen.size >= 3;
    }, 120_000, 'three more samples');
    assert.equal((await fetch(new URL('/api/throughput', d.url))).status, 404);
  } finally {
    await d.close();
  }
  // So the directory's reader hears of the loss: one error, between the records around it.
  const q2 = await DiskQueue.open<Uint8Array>(dir, { segmentSize: 4096 });
  try {
    const r = q2.reader();
    const got: string[] = [];
    for (let i = 0; i < 3; i++) {
      got.push(
        await r.tryTake().then(
          (v) => (v === undefined ? 'empty' : Buffer.from(v.value).toString()),
          (err: unknown) => (err instanceof CorruptError ? 'CorruptError' : `other: ${String(err)}`),
        ),
      );
    }
    assert.deepEqual(got, ['alpha', 'CorruptError', 'charlie']);
  } finally {
    await q2.close();
  }
});

test('ferry dashboard refuses a non-loopback bind without a token, and a config that builds nothing', async () => {
  const res = await ferry(['dashboard', '--queue', join(work, 'missing.json'), '--host', '0.0.0.0']);
  assert.equal(res.code, 2);
  const none = await ferry(['dashboard']);
  assert.equal(none.code, 2);
  assert.match(none.stderr, /--queue CONFIG.json or --dir DIR/);
  const cfg = join(work, 'off.json');
  await writeFile(cfg, '{"enabled": false, "type": "memory"}');
  const off = await ferry(['dashboard', '--queue', cfg, '--port', '0']);
  assert.equal(off.code, 2);
  assert.match(off.stderr, /builds no queue/);
  const sqlite = join(work, 'cli.json');
  await writeFile(sqlite, JSON.stringify({ enabled: true, type: 'sqlite', config: { path: join(work, 'cli.db') } }));
  const open0 = await ferry(['dashboard', '--queue', sqlite, '--host', '0.0.0.0', '--port', '0']);
  assert.equal(open0.code, 2);
  assert.match(open0.stderr, /requires a token/);
  // A mistyped path is refused, not created and shown as an empty queue.
  const missing = await ferry(['dashboard', '--queue', sqlite, '--port', '0']);
  assert.equal(missing.code, 2, missing.stderr);
  assert.match(missing.stderr, /no queue at .*cli\.db.*the SQLite file does not exist/);
  assert.equal(existsSync(join(work, 'cli.db')), false, 'no database was made');
});

test('ferry dashboard serves a queue from its config file until SIGTERM', async () => {
  const { spawnChild: spawn } = await import('../helpers/children.js');
  const { ROOT } = await import('../cli/helpers.js');
  const cfg = join(work, 'serve.json');
  await writeFile(cfg, JSON.stringify({ enabled: true, type: 'sqlite', config: { path: join(work, 'serve.db') } }));
  const seed = (await createQueue(JSON.parse(await readFile(cfg, 'utf8'))))!;
  const s = await seed.subscribe('t', 'g', async () => {});
  await s.close();
  await seed.publish({ topic: 't', payload: Buffer.from('x') }, { topic: 't', payload: Buffer.from('y') });
  await seed.close();
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'src', 'cli', 'main.ts'), 'dashboard', '--queue', cfg, '--port', '0', '--token', 'serve-token-1'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stderr.on('data', (b: Buffer) => {
      stderr += b.toString();
      const m = /dashboard at (http:\/\/\S+\/)/.exec(stderr);
      if (m) resolve(m[1]!);
    });
    child.on('exit', () => reject(new Error(`exited early: ${stderr}`)));
  });
  try {
    assert.equal((await fetch(new URL('/api/overview', url))).status, 401);
    const o = (await (await fetch(new URL('/api/overview', url), { headers: { authorization: 'Bearer serve-token-1' } })).json()) as { groups: Record<string, unknown>[] };
    assert.equal((await fetch(new URL('/api/overview', url), { headers: { authorization: 'bearer serve-token-1' } })).status, 200, 'the scheme is case-insensitive');
    assert.equal(o.groups.length, 1);
    const { oldestPendingAgeMs, ...counts } = o.groups[0]!;
    assert.deepEqual(counts, { topic: 't', group: 'g', pending: 2, leased: 0, dead: 0, paused: false });
    assert.equal(typeof oldestPendingAgeMs, 'number');
  } finally {
    const code = new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    child.kill('SIGTERM');
    assert.equal(await code, 0);
  }
});
