/**
 * `ferry forward --http URL --batch 100` and `--batch 1` in lines/s, each
 * beside its raw twin measured in the same run against the same server: a
 * plain loop POSTing the same file's lines 100 (or 1) to a body, over
 * keep-alive connections, with as many POSTs in flight as forward keeps by
 * default with `--http` (4).
 *
 * The file (200,000 lines of 100 bytes for batches of 100, a tenth of that
 * for batches of 1; 20,000 and 2,000 with --quick) is written once per row.
 * Each row runs 5 alternating rounds (raw twin, forward, raw twin, …) in
 * this process and reports both medians: forward is a long-running job, so
 * the row measures it once the code is compiled; `firstRoundRatio` keeps the
 * first round's ratio, where forward's spool code still runs unoptimised
 * (a one-off start-up cost of a few hundred milliseconds).
 * forward runs in this process from start to exit: it appends every line to a
 * spool (one fdatasync per read of the file), delivers, and commits; the raw
 * loop only POSTs. The server is a child process that answers 204 and counts
 * lines, so the figure is checked: every line arrived, at least once.
 */
import * as fs from 'node:fs';
import { spawn, type ChildProcess } from 'node:child_process';
import { Agent, request } from 'node:http';
import { join } from 'node:path';
import { forward, DEFAULT_HTTP_CONCURRENCY } from '../src/cli/forward.js';
import { median, withBaseline, type BenchSuite } from './harness.js';

const LINE = 100;
const BATCHES = [100, 1] as const;
/** Alternating rounds (raw twin, then forward) per row; the row gives the medians. */
const ROUNDS = 5;

const SERVER = `
const http = require('node:http');
let lines = 0;
let posts = 0;
http.createServer((req, res) => {
  posts++;
  req.on('data', (c) => { for (let i = c.indexOf(10); i !== -1; i = c.indexOf(10, i + 1)) lines++; });
  req.on('end', () => { res.statusCode = 204; res.end(); });
}).listen(0, '127.0.0.1', function () { process.stdout.write('port ' + this.address().port + '\\n'); });
process.stdin.on('data', () => process.stdout.write('lines ' + lines + ' ' + posts + '\\n'));
process.stdin.on('end', () => process.exit(0));
`;

/** The counting server: its URL, a way to read its count, and a stop. */
async function startServer(): Promise<{ url: string; lines(): Promise<{ lines: number; posts: number }>; stop(): void }> {
  const child: ChildProcess = spawn(process.execPath, ['-e', SERVER], { stdio: ['pipe', 'pipe', 'inherit'] });
  const waiters: Array<(line: string) => void> = [];
  let buf = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => {
    buf += chunk;
    for (let i = buf.indexOf('\n'); i !== -1; i = buf.indexOf('\n')) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      waiters.shift()?.(line);
    }
  });
  const next = () => new Promise<string>((resolve) => waiters.push(resolve));
  const port = (await next()).split(' ')[1];
  return {
    url: `http://127.0.0.1:${port}/`,
    async lines() {
      const answer = next();
      child.stdin!.write('?');
      const [, lines, posts] = (await answer).split(' ');
      return { lines: Number(lines), posts: Number(posts) };
    },
    stop: () => {
      child.stdin!.end();
      child.kill();
    },
  };
}

/** Raw twin: the file's lines POSTed `batch` to a body, `concurrency` POSTs in flight. */
async function rawPosts(file: string, url: string, batch: number, concurrency: number): Promise<{ lines: number; ms: number }> {
  const start = performance.now();
  const data = fs.readFileSync(file);
  const bodies: Buffer[] = [];
  let lines = 0;
  let from = 0;
  for (let n = 0, at = data.indexOf(10); at !== -1; at = data.indexOf(10, at + 1)) {
    lines++;
    if (++n === batch) {
      bodies.push(data.subarray(from, at + 1));
      from = at + 1;
      n = 0;
    }
  }
  if (from < data.length) bodies.push(data.subarray(from));
  const agent = new Agent({ keepAlive: true });
  let next = 0;
  const post = (body: Buffer) =>
    new Promise<void>((resolve, reject) => {
      const req = request(url, { method: 'POST', agent, headers: { 'content-type': 'text/plain', 'content-length': body.length } }, (res) => {
        res.on('end', () => (res.statusCode === 204 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
        res.resume();
      });
      req.on('error', reject);
      req.end(body);
    });
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < bodies.length) await post(bodies[next++]!);
    }),
  );
  agent.destroy();
  return { lines, ms: performance.now() - start };
}

export const suite: BenchSuite = {
  name: 'forward',
  async run(ctx) {
    const server = await startServer();
    try {
      for (const batch of BATCHES) {
        const count = Math.round((batch === 1 ? 20_000 : 200_000) * ctx.scale);
        const file = join(ctx.tmpDir, `lines-${batch}.txt`);
        const line = 'x'.repeat(LINE - 1) + '\n';
        fs.writeFileSync(file, line.repeat(count));
        const raws: number[] = [];
        const rates: number[] = [];
        let duplicates = 0;
        let perPost = 0;
        for (let round = 0; round < ROUNDS; round++) {
          const before = await server.lines();
          const raw = await rawPosts(file, server.url, batch, DEFAULT_HTTP_CONCURRENCY);
          const afterRaw = await server.lines();
          if (raw.lines !== count || afterRaw.lines - before.lines !== count) throw new Error(`raw twin: posted ${raw.lines}, server counted ${afterRaw.lines - before.lines} of ${count}`);
          raws.push((raw.lines * 1000) / raw.ms);

          const dir = join(ctx.tmpDir, `spool-${batch}-${round}`);
          const start = performance.now();
          const status = await forward(file, { dir, http: server.url, batch, quiet: true });
          const ms = performance.now() - start;
          const end = await server.lines();
          const posts = end.posts - afterRaw.posts;
          // A body of one record carries no newline: each POST is a line.
          const got = batch === 1 ? posts : end.lines - afterRaw.lines;
          if (status !== 0 || got < count) throw new Error(`forward exited ${status}; the server counted ${got} of ${count} lines`);
          rates.push((count * 1000) / ms);
          duplicates += got - count;
          perPost = got / posts;
          fs.rmSync(dir, { recursive: true, force: true });
        }
        ctx.report(
          withBaseline(`forward.http.batch${batch}`, 'lines/s', median(rates), median(raws), {
            lines: count,
            lineBytes: LINE,
            concurrency: DEFAULT_HTTP_CONCURRENCY,
            duplicates,
            linesPerPost: perPost,
            rounds: ROUNDS,
            firstRoundRatio: rates[0]! / raws[0]!,
          }),
        );
      }
    } finally {
      server.stop();
    }
  },
};
