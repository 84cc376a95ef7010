/**
 * The dashboard's 403 answers to a change (POST) say which check refused
 * it: a missing CSRF token, a wrong one, or an Origin that is not the
 * dashboard's page (another site, or `null`), the last with the right token.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { createQueue } from '../../src/queue/index.js';
import { startDashboard, type Dashboard } from '../../src/dashboard/server.js';

async function csrfOf(d: Dashboard): Promise<string> {
  const html = await (await fetch(d.url)).text();
  return /name="csrf-token" content="([0-9a-f]{64})"/.exec(html)![1]!;
}

/** A redrive POST with exactly these extra headers; resolves to the status and the error message. */
function redrive(d: Dashboard, headers: Record<string, string>): Promise<{ status: number; error: string }> {
  const body = JSON.stringify({ topic: 'dlq', ids: 'all' });
  return new Promise((resolve, reject) => {
    const req = request(new URL('/api/redrive', d.url), { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        let error = text;
        try {
          error = String((JSON.parse(text) as { error?: unknown }).error ?? text);
        } catch {
          // not JSON: the text itself
        }
        resolve({ status: res.statusCode!, error });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('a refused change says which check refused it', { timeout: 60_000 }, async () => {
  const queue = (await createQueue({ enabled: true, type: 'memory' }))!;
  const d = await startDashboard({ queue });
  try {
    const csrf = await csrfOf(d);
    const own = new URL(d.url).origin;

    const missing = await redrive(d, {});
    assert.equal(missing.status, 403);
    assert.match(missing.error, /missing CSRF token/);

    const wrong = await redrive(d, { 'x-csrf-token': 'f'.repeat(64) });
    assert.equal(wrong.status, 403);
    assert.match(wrong.error, /wrong CSRF token/);

    const foreign = await redrive(d, { 'x-csrf-token': csrf, origin: 'https://attacker.example' });
    assert.equal(foreign.status, 403);
    assert.match(foreign.error, /Origin "https:\/\/attacker\.example" refused/);
    assert.doesNotMatch(foreign.error, /CSRF token/, 'the token was right: the message must not blame it');

    const otherScheme = await redrive(d, { 'x-csrf-token': csrf, origin: own.replace(/^http:/, 'https:') });
    assert.equal(otherScheme.status, 403, 'the same host under another scheme is another origin');

    const nul = await redrive(d, { 'x-csrf-token': csrf, origin: 'null' });
    assert.equal(nul.status, 403);
    assert.match(nul.error, /Origin "null" refused/);
    assert.doesNotMatch(nul.error, /CSRF token/);

    const ok = await redrive(d, { 'x-csrf-token': csrf, origin: own });
    assert.equal(ok.status, 200, ok.error);
    const noOrigin = await redrive(d, { 'x-csrf-token': csrf });
    assert.equal(noOrigin.status, 200, noOrigin.error);
  } finally {
    await d.close();
    await queue.close();
  }
});

test('a body over 64 KiB is a 413 that says the connection closes; fetch goes on with the next request', { timeout: 60_000 }, async () => {
  const queue = (await createQueue({ enabled: true, type: 'memory' }))!;
  const d = await startDashboard({ queue });
  try {
    const csrf = await csrfOf(d);
    const big = await new Promise<{ status: number; connection: string | undefined }>((resolve, reject) => {
      const req = request(new URL('/api/redrive', d.url), { method: 'POST', headers: { 'content-type': 'application/json', 'x-csrf-token': csrf } }, (res) => {
        res.resume();
        resolve({ status: res.statusCode!, connection: res.headers.connection });
      });
      req.on('error', reject);
      req.end(JSON.stringify({ topic: 'dlq', ids: ['x'.repeat(200 * 1024)] }));
    });
    assert.deepEqual(big, { status: 413, connection: 'close' });
    // Through fetch's pool: the refused request, then ordinary ones.
    const refused = await fetch(new URL('/api/redrive', d.url), { method: 'POST', headers: { 'content-type': 'application/json', 'x-csrf-token': csrf }, body: JSON.stringify({ topic: 'dlq', ids: ['x'.repeat(200 * 1024)] }) }).then(
      (r) => r.status,
      (err: unknown) => `rejected: ${String(err)}`,
    );
    assert.ok(refused === 413 || String(refused).includes('rejected'), `413, or the refused request's own connection reset (${refused})`);
    for (let i = 0; i < 3; i++) assert.equal((await fetch(new URL('/api/overview', d.url))).status, 200, `request ${i} after it`);
  } finally {
    await d.close();
    await queue.close();
  }
});
