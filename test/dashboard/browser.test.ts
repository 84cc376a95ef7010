/**
 * `ferry dashboard` in a real browser: Debian's chromium, driven headless by
 * playwright-core. A SQLite queue gets messages, some of which fail into a
 * dead-letter topic; the page's counts must equal `stats()`, an untrusted
 * payload must show as text, a redrive from the page must reach the
 * consumer, Pause and Resume must stop and restart the group's consumer
 * (the state shown and `stats().paused` agreeing), a group removed from the
 * page must be gone, and requests without the access token or the CSRF
 * token must be refused.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { createQueue, permanent, type Queue, type Subscription } from '../../src/queue/index.js';
import { startDashboard, type Dashboard } from '../../src/dashboard/server.js';

const CHROMIUM = '/usr/bin/chromium';
const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const TOKEN = 'test-token-5f1c2e';
const XSS = '<img src=x onerror=alert(1)>';
const TOPIC = 'orders';
const DLQ = 'orders.dlq';

let work: string;
let queue: Queue;
let sub: Subscription;
let dash: Dashboard;
let context: BrowserContext;
let page: Page;
const dialogs: string[] = [];
/** Payloads the billing handler accepted, with the redrive header when there was one. */
const delivered: { payload: string; redrivenFrom?: string }[] = [];
let healed = false;

async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

before(async () => {
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)`);
  work = await mkdtemp(join(tmpdir(), 'ferry-dashboard-test-'));
  queue = (await createQueue({ enabled: true, type: 'sqlite', config: { path: join(work, 'q.db') } }))!;
  // Registered before publishing, never consumed: its counts stay put.
  const audit = await queue.subscribe(TOPIC, 'audit', async () => {});
  await audit.close();
  dash = await startDashboard({ queue, token: TOKEN, deadLetterTopics: [DLQ], refreshMs: 200 });
  sub = await queue.subscribe(
    TOPIC,
    'billing',
    async (d) => {
      const text = Buffer.from(d.payload).toString('utf8');
      if (!healed && text.startsWith('fail')) throw permanent(new Error(`cannot bill ${text}`));
      if (!healed && text === XSS) throw permanent(new Error(XSS));
      delivered.push({ payload: text, redrivenFrom: d.headers?.['x-queue-redrive-from'] });
    },
    { deadLetterTopic: DLQ, pollIntervalMs: 20 },
  );
  const payloads = ['ok 1', 'fail 1', 'ok 2', XSS, 'ok 3', 'fail 2'];
  for (const p of payloads) await queue.publish({ topic: TOPIC, payload: Buffer.from(p), headers: { 'x-origin': `test "${p}"` } });
  await until('billing to settle', async () => {
    const s = await queue.stats(TOPIC, 'billing');
    return s.dead === 3 && s.pending === 0 && s.leased === 0;
  });

  context = await chromium.launchPersistentContext(join(work, 'profile'), { executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1360, height: 1100 } });
  page = context.pages()[0] ?? (await context.newPage());
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
  await page.goto(`${dash.url}?token=${TOKEN}`);
});

after(async () => {
  await context?.close();
  await dash?.close();
  await sub?.close();
  await queue?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

/** The numbers of one group's row as the page shows them. */
async function rowOnPage(topic: string, group: string): Promise<{ pending: number; leased: number; dead: number } | null> {
  const row = page.locator(`#groups tbody tr[data-topic="${topic}"][data-group="${group}"]`);
  if ((await row.count()) === 0) return null;
  const cell = async (f: string) => Number(await row.locator(`td[data-field="${f}"]`).textContent());
  return { pending: await cell('pending'), leased: await cell('leased'), dead: await cell('dead') };
}

test('the page lists every group with the counts stats() gives', async () => {
  assert.equal(new URL(page.url()).search, '', 'the token left the address bar');
  await until('both groups on the page', async () => (await page.locator('#groups tbody tr').count()) === 2);
  const groups = await queue.listGroups();
  assert.deepEqual(
    groups.map((g) => `${g.topic}/${g.group}`),
    [`${TOPIC}/audit`, `${TOPIC}/billing`],
  );
  for (const g of groups) {
    const want = await queue.stats(g.topic, g.group);
    await until(`${g.group} on the page to equal stats()`, async () => {
      const got = await rowOnPage(g.topic, g.group);
      return got !== null && got.pending === want.pending && got.leased === want.leased && got.dead === want.dead;
    });
  }
  assert.deepEqual(await rowOnPage(TOPIC, 'audit'), { pending: 6, leased: 0, dead: 0 });
  assert.deepEqual(await rowOnPage(TOPIC, 'billing'), { pending: 0, leased: 0, dead: 3 });
  assert.notEqual(await page.locator('#groups tbody tr[data-group="audit"] td[data-field="oldest"]').textContent(), '—');
});

test('dead letters show payload, headers, error and attempts, and an HTML payload stays text', async () => {
  await until('three dead letters', async () => (await page.locator('#dead-letters tbody tr').count()) === 3);
  const shown = await page.locator('#dead-letters pre[data-field="payload"]').allTextContents();
  assert.deepEqual(shown, ['fail 1', XSS, 'fail 2']);
  const xssRow = page.locator('#dead-letters tbody tr').nth(1);
  assert.equal(await xssRow.locator('td[data-field="error"]').textContent(), XSS);
  assert.equal(await xssRow.locator('td[data-field="attempts"]').textContent(), '1');
  assert.equal(await xssRow.locator('td[data-field="source"]').textContent(), `${TOPIC} / billing`);
  assert.match((await xssRow.locator('dl.headers').textContent()) ?? '', /x-origin/);
  // Nothing the payload or the error text holds became markup.
  assert.equal(await page.locator('img').count(), 0);
  assert.deepEqual(dialogs, []);
});

test('the throughput chart is drawn from the queue\'s counts', async () => {
  await page.locator('#chart canvas').first().waitFor();
  type Series = { mode: string; t: number[]; completed: (number | null)[]; deadLettered: (number | null)[] };
  const sum = (xs: (number | null)[]) => xs.reduce<number>((n, x) => n + (x ?? 0), 0);
  let res!: Series;
  // Sampled rates reach the chart once the second they were sampled in has passed.
  await until('three dead letters on the chart', async () => {
    res = (await page.evaluate(async () => (await fetch('/api/throughput')).json())) as Series;
    return Math.abs(sum(res.deadLettered) - 3) < 1e-9;
  });
  assert.equal(res.t.length, 900);
  if (res.mode === 'events') assert.equal(sum(res.completed), 3);
});

test('redriving one dead letter from the page delivers it again, and only it', async () => {
  healed = true;
  delivered.length = 0;
  const row = page.locator('#dead-letters tbody tr').nth(1);
  const copyId = await row.getAttribute('data-id');
  await row.locator('button', { hasText: 'Redrive' }).click();
  await page.locator('#confirm').waitFor({ state: 'visible' });
  await page.locator('#confirm-ok').click();
  await until('the redriven message to be delivered', () => delivered.length >= 1);
  await new Promise((r) => setTimeout(r, 300)); // anything else redriven would arrive too
  assert.deepEqual(delivered, [{ payload: XSS, redrivenFrom: copyId }]);
  await until('the notice', async () => /redrove 1 message/.test((await page.locator('#notice').textContent()) ?? ''));
});

test('cancelling the confirmation changes nothing', async () => {
  await page.locator('#groups tbody tr[data-group="audit"] button', { hasText: 'Remove' }).click();
  await page.locator('#confirm-cancel').click();
  assert.equal((await queue.listGroups(TOPIC)).length, 2);
});

test('requests without the token or the CSRF token are refused', async () => {
  const api = new URL('/api/redrive', dash.url).href;
  const body = JSON.stringify({ topic: DLQ, ids: 'all' });
  const csrf = await page.locator('meta[name="csrf-token"]').getAttribute('content');
  assert.match(csrf ?? '', /^[0-9a-f]{64}$/);

  assert.equal((await fetch(new URL('/api/overview', dash.url))).status, 401);
  assert.equal((await fetch(dash.url)).status, 401);
  assert.equal((await fetch(new URL('/api/overview', dash.url), { headers: { authorization: 'Bearer wrong-token-00' } })).status, 401);
  assert.equal((await fetch(new URL('/api/overview', dash.url), { headers: { authorization: `Bearer ${TOKEN}` } })).status, 200);
  // The token but no CSRF token, a wrong one, or a foreign Origin: 403.
  const auth = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
  assert.equal((await fetch(api, { method: 'POST', headers: auth, body })).status, 403);
  assert.equal((await fetch(api, { method: 'POST', headers: { ...auth, 'x-csrf-token': '0'.repeat(64) }, body })).status, 403);
  assert.equal((await fetch(api, { method: 'POST', headers: { ...auth, 'x-csrf-token': csrf!, origin: 'http://evil.example' }, body })).status, 403);
  // The CSRF token but no access token: 401.
  assert.equal((await fetch(api, { method: 'POST', headers: { 'content-type': 'application/json', 'x-csrf-token': csrf! }, body })).status, 401);
  // From the page itself (the cookie goes along) without the CSRF header: 403.
  const fromPage = await page.evaluate(async (b) => (await fetch('/api/redrive', { method: 'POST', headers: { 'content-type': 'application/json' }, body: b })).status, body);
  assert.equal(fromPage, 403);
  // A form post (what a cross-site page could send) is not JSON: refused even with both tokens.
  const form = await fetch(api, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'x-csrf-token': csrf!, 'content-type': 'application/x-www-form-urlencoded' }, body: 'topic=x' });
  assert.equal(form.status, 415);
  // Bad input: 400, nothing changed.
  const bad = await fetch(api, { method: 'POST', headers: { ...auth, 'x-csrf-token': csrf! }, body: JSON.stringify({ topic: '../etc', ids: 'all' }) });
  assert.equal(bad.status, 400);
  assert.equal(delivered.length, 1, 'no refused request redrove anything');
});

test('Pause and Resume on the page stop and restart the group\'s consumer, as stats() says', async () => {
  const row = page.locator(`#groups tbody tr[data-topic="${TOPIC}"][data-group="billing"]`);
  const state = row.locator('td[data-field="state"]');
  const pause = row.locator('button[data-action="pause"]');
  const resume = row.locator('button[data-action="resume"]');
  await until('billing shown running', async () => (await state.textContent()) === 'running');
  assert.equal(await resume.isDisabled(), true, 'a running group offers Pause only');
  delivered.length = 0;

  await pause.click();
  await until('billing shown paused', async () => (await state.textContent()) === 'paused');
  assert.equal((await queue.stats(TOPIC, 'billing')).paused, true);
  assert.equal(await pause.isDisabled(), true);
  await until('the pause notice', async () => /paused group billing of orders/.test((await page.locator('#notice').textContent()) ?? ''));
  // Publishing goes on; the paused group's consumer (in this process, polling every 20 ms) claims nothing.
  await queue.publish({ topic: TOPIC, payload: Buffer.from('while paused') });
  await until('the message shown pending', async () => (await rowOnPage(TOPIC, 'billing'))?.pending === 1);
  assert.equal(delivered.length, 0, 'nothing delivered while paused');

  await resume.click();
  await until('billing shown running again', async () => (await state.textContent()) === 'running');
  assert.equal((await queue.stats(TOPIC, 'billing')).paused, false);
  await until('the message published while paused to be delivered', () => delivered.length === 1);
  assert.deepEqual(
    delivered.map((d) => d.payload),
    ['while paused'],
  );
  await until('billing shown with nothing pending', async () => (await rowOnPage(TOPIC, 'billing'))?.pending === 0);
});

test('screenshot', async () => {
  const path = join(process.env.FERRY_TEST_ARTIFACTS ?? tmpdir(), 'ferry-dashboard.png');
  await page.screenshot({ path, fullPage: true });
  assert.ok(existsSync(path));
  console.log(`# screenshot: ${path}`);
});

test('a group removed from the page is gone from the queue', async () => {
  await page.locator('#groups tbody tr[data-group="audit"] button', { hasText: 'Remove' }).click();
  await page.locator('#confirm-ok').click();
  await until('audit to leave the page', async () => (await page.locator('#groups tbody tr[data-group="audit"]').count()) === 0);
  assert.deepEqual(await queue.listGroups(TOPIC), [{ topic: TOPIC, group: 'billing' }]);
});
