/**
 * `ferry forward` against a local HTTP server that fails 30% of requests and
 * is down for a while, with the forwarder SIGKILLed mid-way and restarted on
 * the same spool and input: every input line must arrive at least once, and
 * with one delivery at a time the lines' first arrivals must be in input order.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawnChild } from '../helpers/children.js';
import { createServer, type Server } from 'node:http';
import { writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { CLI, ROOT, ferry, scratch } from './helpers.js';
import { fullJitterBackoffMs } from '../../src/backoff.js';


/** A flaky NDJSON sink: every request body's lines are recorded only when the answer is 200. */
class Sink {
  arrived: string[] = [];
  requests = 0;
  failed = 0;
  private server: Server | undefined;
  private seed = 42;
  port = 0;

  private random(): number {
    this.seed = (this.seed * 1103515245 + 12345) % 2 ** 31;
    return this.seed / 2 ** 31;
  }

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.requests++;
        if (this.random() < 0.3) {
          this.failed++;
          res.writeHead(503).end();
          return;
        }
        for (const line of Buffer.concat(chunks).toString().split('\n')) if (line) this.arrived.push(line);
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => this.server!.listen(this.port, '127.0.0.1', () => r()));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    s?.closeAllConnections();
    await new Promise<void>((r) => (s ? s.close(() => r()) : r()));
  }
}

function startForward(args: string[]): { child: ChildProcess; exited: Promise<{ code: number | null; signal: string | null; stderr: string }> } {
  const child = spawnChild(process.execPath, [...CLI, 'forward', ...args], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
  const exited = new Promise<{ code: number | null; signal: string | null; stderr: string }>((r) => child.on('close', (code, signal) => r({ code, signal, stderr })));
  return { child, exited };
}

const until = async (cond: () => boolean, ms: number) => {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('ferry forward', () => {
  for (const concurrency of [1, 4]) {
    const order = concurrency === 1 ? 'first arrivals in order' : 'first arrivals in any order';
    it(`--concurrency ${concurrency} survives a 30%-failing endpoint, an outage and a SIGKILL: every line arrives, ${order}`, { timeout: 120_000 }, async () => {
      const { dir, cleanup } = await scratch();
      const lines = Array.from({ length: 3000 }, (_, i) => `{"n":${i}}`);
      const input = join(dir, 'in.ndjson');
      writeFileSync(input, `${lines.join('\n')}\n`);
      const sink = new Sink();
      await sink.start();
      const args = ['--dir', join(dir, 'spool'), '--http', `http://127.0.0.1:${sink.port}/ingest`, '--batch', '50', '--concurrency', String(concurrency), '--retry-base-ms', '5', '--retry-max-ms', '100', '--timeout-ms', '2000', input];
      try {
        const first = startForward(args);
        await until(() => sink.arrived.length >= 600, 30_000);
        await sink.stop(); // the endpoint goes away for a while
        await new Promise((r) => setTimeout(r, 300));
        first.child.kill('SIGKILL');
        const killed = await first.exited;
        assert.equal(killed.signal, 'SIGKILL');
        const before = sink.arrived.length;
        assert.ok(before < lines.length, 'killed before it was done');

        const second = startForward(args);
        await new Promise((r) => setTimeout(r, 500)); // still down: it retries
        await sink.start();
        const res = await second.exited;
        assert.equal(res.code, 0, res.stderr);
        assert.match(res.stderr, /forwarded \d+ records/);
        assert.ok(sink.failed > 0, 'the endpoint did fail requests');

        const seen = new Set<string>();
        const firsts: string[] = [];
        for (const l of sink.arrived) {
          if (!seen.has(l)) firsts.push(l);
          seen.add(l);
        }
        if (concurrency === 1) assert.deepEqual(firsts, lines, 'every line arrived at least once, first arrivals in input order');
        else assert.deepEqual([...firsts].sort(), [...lines].sort(), 'every line arrived at least once');
      } finally {
        await sink.stop();
        await cleanup();
      }
    });
  }

  it('--concurrency N keeps N requests in flight at the server, never more', { timeout: 120_000 }, async () => {
    const { dir, cleanup } = await scratch();
    const N = 3;
    let inFlight = 0;
    let most = 0;
    const held: (() => void)[] = [];
    const arrived: string[] = [];
    // Holds each request until N are in flight (or, should that never happen, a while), then answers them all.
    let fallback: NodeJS.Timeout | undefined;
    const release = () => {
      clearTimeout(fallback);
      fallback = undefined;
      for (const answer of held.splice(0)) answer();
    };
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        inFlight++;
        most = Math.max(most, inFlight);
        held.push(() => {
          arrived.push(Buffer.concat(chunks).toString());
          inFlight--;
          res.writeHead(200).end();
        });
        if (held.length >= N) release();
        else fallback ??= setTimeout(release, 5_000);
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as AddressInfo).port;
    try {
      const lines = Array.from({ length: 4 * N }, (_, i) => `line ${i}`);
      const res = await ferry(['forward', '--dir', join(dir, 's'), '--http', `http://127.0.0.1:${port}/`, '--concurrency', String(N), '-q'], { input: `${lines.join('\n')}\n`, timeoutMs: 100_000 });
      assert.equal(res.code, 0, res.stderr);
      assert.equal(most, N, `at most and at some point exactly ${N} requests in flight`);
      assert.deepEqual([...arrived].sort(), [...lines].sort());
    } finally {
      clearTimeout(fallback);
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await cleanup();
    }
  });

  it('--exec delivers records one per line to the command\'s stdin, retrying a failing command', { timeout: 300_000 }, async () => {
    const { dir, cleanup } = await scratch();
    try {
      const out = join(dir, 'out.txt');
      const flag = join(dir, 'failed-once');
      // Fails the first delivery, then appends.
      const cmd = `if [ ! -e ${flag} ]; then touch ${flag}; exit 3; fi; cat >> ${out}`;
      const res = await ferry(['forward', '--dir', join(dir, 's'), '--exec', cmd, '--batch', '3', '--retry-base-ms', '1'], { input: 'a\nb\nc\nd\n' });
      assert.equal(res.code, 0, res.stderr);
      assert.equal(readFileSync(out, 'utf8'), 'a\nb\nc\nd\n');
      assert.match(res.stderr, /accepted 4 lines, 1 retries, 0 bytes left/);
    } finally {
      await cleanup();
    }
  });

  it('needs exactly one of --exec and --http', async () => {
    const { dir, cleanup } = await scratch();
    try {
      const res = await ferry(['forward', '--dir', join(dir, 's')], { input: 'a\n' });
      assert.equal(res.code, 2);
      assert.match(res.stderr, /exactly one of --exec CMD and --http URL/);
    } finally {
      await cleanup();
    }
  });

  it('full-jitter backoff: capped, exponential, from 0 up', () => {
    assert.equal(fullJitterBackoffMs(1, 100, 30_000, () => 1), 100);
    assert.equal(fullJitterBackoffMs(4, 100, 30_000, () => 1), 800);
    assert.equal(fullJitterBackoffMs(40, 100, 30_000, () => 1), 30_000);
    assert.equal(fullJitterBackoffMs(4, 100, 30_000, () => 0.5), 400);
    assert.equal(fullJitterBackoffMs(4, 100, 30_000, () => 0), 0);
  });
});

describe('ferry forward: arguments and failures', () => {
  it('rejects a URL that new URL() refuses, or with no host, before opening anything (exit 2)', async () => {
    const { dir, cleanup } = await scratch();
    try {
      for (const url of ['http://', 'http://exa mple/', 'ftp://example/', 'http:///path', 'http:/path', 'https:example/x']) {
        const res = await ferry(['forward', '--dir', join(dir, 's'), '--http', url], { input: 'a\n', timeoutMs: 120_000 });
        assert.equal(res.code, 2, `${url}: ${res.stderr}`);
        assert.match(res.stderr, /--http /);
      }
    } finally {
      await cleanup();
    }
  });

  it('rejects an empty --exec command (exit 2)', async () => {
    const { dir, cleanup } = await scratch();
    try {
      const res = await ferry(['forward', '--dir', join(dir, 's'), '--exec', ' '], { input: 'a\n', timeoutMs: 120_000 });
      assert.equal(res.code, 2, res.stderr);
      assert.match(res.stderr, /--exec needs a command/);
    } finally {
      await cleanup();
    }
  });

  it('a directory as FILE is an unreadable input: exit 2', async () => {
    const { dir, cleanup } = await scratch();
    try {
      const res = await ferry(['forward', '--dir', join(dir, 's'), '--exec', 'cat', dir], { timeoutMs: 120_000 });
      assert.equal(res.code, 2, res.stderr);
      assert.match(res.stderr, /is a directory/);
    } finally {
      await cleanup();
    }
  });

  it('--http does not follow a redirect: the delivery is retried to the URL given, never turned into a GET', { timeout: 300_000 }, async () => {
    const { dir, cleanup } = await scratch();
    const seen: string[] = [];
    let redirected = 0;
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push(`${req.method} ${req.url} ${Buffer.concat(chunks).toString()}`);
        if (req.url === '/ingest' && redirected++ === 0) res.writeHead(302, { location: '/elsewhere' }).end();
        else res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      const port = (server.address() as AddressInfo).port;
      const res = await ferry(['forward', '--dir', join(dir, 's'), '--http', `http://127.0.0.1:${port}/ingest`, '--retry-base-ms', '1'], { input: 'only\n', timeoutMs: 120_000 });
      assert.equal(res.code, 0, res.stderr);
      assert.match(res.stderr, /HTTP 302/);
      assert.deepEqual(seen, ['POST /ingest only', 'POST /ingest only']);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await cleanup();
    }
  });

  it('prints why delivery fails when stderr is not a terminal', { timeout: 300_000 }, async () => {
    const { dir, cleanup } = await scratch();
    try {
      const flag = join(dir, 'failed-once');
      const out = join(dir, 'out.txt');
      const cmd = `if [ ! -e ${flag} ]; then touch ${flag}; echo refused >&2; exit 3; fi; cat >> ${out}`;
      const res = await ferry(['forward', '--dir', join(dir, 's'), '--exec', cmd, '--retry-base-ms', '1'], { input: 'a\n' });
      assert.equal(res.code, 0, res.stderr);
      assert.match(res.stderr, /delivery failed, retrying: .*(3|refused)/);
      assert.equal(readFileSync(out, 'utf8'), 'a\n');
    } finally {
      await cleanup();
    }
  });
});
