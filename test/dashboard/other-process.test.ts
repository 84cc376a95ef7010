/**
 * `ferry dashboard --queue` watching a SQLite queue that another process
 * consumes: the dashboard's own queue sees none of the consumer's events, so
 * the chart must be drawn from the sampled counts. After the consumer
 * completed 30 messages and dead-lettered 30, `/api/throughput` and the page
 * in Chromium must show 30 completed and 30 dead-lettered, not zeros.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawnChild } from '../helpers/children.js';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { createQueue } from '../../src/queue/index.js';
import { ROOT } from '../cli/helpers.js';

const CHROMIUM = '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const MAIN = join(ROOT, 'src', 'cli', 'main.ts');
const CHILD = join(ROOT, 'test', 'dashboard', 'consumer-child.ts');
const TOPIC = 'orders';
const GROUP = 'billing';
const DLQ = 'orders.dlq';

const work = await mkdtemp(join(tmpdir(), 'ferry-dashboard-other-'));
const children: ChildProcess[] = [];
let context: BrowserContext | undefined;
after(async () => {
  await context?.close();
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await rm(work, { recursive: true, force: true });
});

type Series = { mode: string; t: number[]; completed: (number | null)[]; deadLettered: (number | null)[] };
const sum = (xs: (number | null)[]) => xs.reduce<number>((n, x) => n + (x ?? 0), 0);

async function until<T>(what: string, check: () => Promise<T | undefined> | T | undefined, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function run(args: string[]): { child: ChildProcess; out: () => string; exited: Promise<number | null> } {
  const child = spawnChild(process.execPath, ['--import', 'tsx', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
  const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
  return { child, out: () => out, exited };
}

test('ferry dashboard shows completed/s and dead-lettered/s of a queue another process consumes', { timeout: 240_000 }, async () => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium`);
  const db = join(work, 'q.db');
  const config = join(work, 'queue.json');
  await writeFile(config, JSON.stringify({ enabled: true, type: 'sqlite', config: { path: db } }));
  // The group is registered, then 60 messages wait for it: 30 to complete, 30 to fail.
  const q = (await createQueue({ enabled: true, type: 'sqlite', config: { path: db } }))!;
  try {
    await (await q.subscribe(TOPIC, GROUP, async () => {})).close();
    for (let i = 0; i < 30; i++) {
      await q.publish({ topic: TOPIC, payload: Buffer.from(`ok ${i}`) });
      await q.publish({ topic: TOPIC, payload: Buffer.from(`fail ${i}`) });
    }
    assert.equal((await q.stats(TOPIC, GROUP)).pending, 60);
  } finally {
    await q.close();
  }

  const dash = run([MAIN, 'dashboard', '--queue', config, '--port', '0', '--refresh-ms', '200', '--dead-letter-topic', DLQ]);
  const url = await until('the dashboard URL', () => /dashboard at (http:\/\/\S+\/)/.exec(dash.out())?.[1]);
  const throughput = async () => (await (await fetch(new URL('/api/throughput', url))).json()) as Series;
  // The dashboard sampled the 60 pending before the consumer starts.
  await until('the group on the dashboard', async () => {
    const o = (await (await fetch(new URL('/api/overview', url))).json()) as { groups: { group: string; pending: number }[] };
    return o.groups.find((g) => g.group === GROUP && g.pending === 60);
  });

  const consumer = run([CHILD, db, TOPIC, GROUP, DLQ]);
  assert.equal(await consumer.exited, 0, consumer.out());

  const s = await until('30 completed and 30 dead-lettered on the chart', async () => {
    const got = await throughput();
    return Math.abs(sum(got.completed) - 30) < 1e-6 && Math.abs(sum(got.deadLettered) - 30) < 1e-6 ? got : undefined;
  });
  assert.equal(s.mode, 'sampled', 'this process does not consume: the rates come from stats()');

  // The page draws both series, and says where the numbers come from.
  context = await chromium.launchPersistentContext(join(work, 'profile'), { executablePath: CHROMIUM, headless: true, args: ARGS });
  const page = context.pages()[0] ?? (await context.newPage());
  await page.goto(url);
  await page.locator('#chart canvas').first().waitFor();
  const legend = await until('the chart legend', async () => {
    const series = page.locator('#chart .u-legend .u-series');
    const rows: { label: string; off: boolean }[] = [];
    for (let i = 0; i < (await series.count()); i++) {
      const tr = series.nth(i);
      rows.push({ label: ((await tr.textContent()) ?? '').trim(), off: /\bu-off\b/.test((await tr.getAttribute('class')) ?? '') });
    }
    return rows.length >= 3 ? rows : undefined;
  });
  const completed = legend.find((r) => r.label.startsWith('completed/s'));
  assert.ok(completed, `a completed/s series: ${JSON.stringify(legend)}`);
  assert.equal(completed.off, false, 'the completed series is shown');
  assert.equal(legend.find((r) => r.label.startsWith('dead-lettered/s'))?.off, false);
  assert.match((await page.locator('#chart-note').textContent()) ?? '', /completed deliveries per second from the fall of pending \+ leased/);
  const fromPage = (await page.evaluate(async () => (await fetch('/api/throughput')).json())) as Series;
  assert.equal(Math.round(sum(fromPage.completed)), 30);
  assert.equal(Math.round(sum(fromPage.deadLettered)), 30);

  dash.child.kill('SIGTERM');
  assert.equal(await dash.exited, 0, dash.out());
});
