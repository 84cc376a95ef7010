/**
 * `ferry forward --http URL --batch 100` and `--batch 1` in lines/s, each
 * beside its raw twin measured in the same run against the same server: a
 * plain loop POSTing the same file's lines 100 (or 1) to a body, over
 * keep-alive connections, with as many POSTs in flight as forward keeps by
 * default with `--http` (4).
 *
 * The file (200,000 lines of 100 bytes for batches of 100, a tenth of that
 * for batches of 1; 20,000 and 2,000 with --quick) is written once per row.
 * Each row runs 5 alternating rounds (raw twin, forward, raw twin, …) and
 * reports both medians: forward is a long-running job, so the row measures
 * it once the code is compiled; `firstRoundRatio` keeps the first round's
 * ratio, where forward's spool code still runs unoptimised (a one-off
 * start-up cost of a few hundred milliseconds). Each side runs in a process
 * of its own for the whole suite (bench/forward-side.ts), so neither's
 * compiled code slows the other's. forward runs from start to exit in its
 * process: it appends every line to a spool (one fdatasync per read of the
 * file), delivers, and commits; the raw loop only POSTs. The server is a
 * third process that answers 204 and counts lines, so the figure is checked:
 * every line arrived, at least once.
 */
import * as fs from 'node:fs';
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { DEFAULT_HTTP_CONCURRENCY } from '../src/cli/forward.js';
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

/** The next line `child` writes to stdout, each call in turn; rejects when it exits first. */
function lineReader(child: ChildProcess, what: string): () => Promise<string> {
  const waiters: Array<{ resolve(line: string): void; reject(err: Error): void }> = [];
  let buf = '';
  let exited: Error | undefined;
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => {
    buf += chunk;
    for (let i = buf.indexOf('\n'); i !== -1; i = buf.indexOf('\n')) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      waiters.shift()?.resolve(line);
    }
  });
  child.on('exit', (code, signal) => {
    exited = new Error(`${what} exited (${signal ?? code})`);
    for (const w of waiters.splice(0)) w.reject(exited);
  });
  return () => new Promise<string>((resolve, reject) => (exited ? reject(exited) : waiters.push({ resolve, reject })));
}

/** A side of the benchmark in its own process (bench/forward-side.ts): sends it a job, resolves with its answer. */
function startSide(side: 'raw' | 'forward'): { run(job: object): Promise<Record<string, number>>; stop(): void } {
  const child = spawn(process.execPath, ['--import', 'tsx', join(import.meta.dirname, 'forward-side.ts'), side], { stdio: ['pipe', 'pipe', 'inherit'] });
  const next = lineReader(child, `the ${side} side`);
  return {
    async run(job) {
      const answer = next();
      child.stdin!.write(`${JSON.stringify(job)}\n`);
      return JSON.parse(await answer) as Record<string, number>;
    },
    stop: () => {
      child.stdin!.end();
      child.kill();
    },
  };
}

/** The counting server: its URL, a way to read its count, and a stop. */
async function startServer(): Promise<{ url: string; lines(): Promise<{ lines: number; posts: number }>; stop(): void }> {
  const child: ChildProcess = spawn(process.execPath, ['-e', SERVER], { stdio: ['pipe', 'pipe', 'inherit'] });
  const next = lineReader(child, 'the counting server');
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

export const suite: BenchSuite = {
  name: 'forward',
  async run(ctx) {
    const server = await startServer();
    const raw = startSide('raw');
    const fwd = startSide('forward');
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
          const posted = await raw.run({ file, url: server.url, batch, concurrency: DEFAULT_HTTP_CONCURRENCY });
          const afterRaw = await server.lines();
          if (posted.lines !== count || afterRaw.lines - before.lines !== count) throw new Error(`raw twin: posted ${posted.lines}, server counted ${afterRaw.lines - before.lines} of ${count}`);
          raws.push((posted.lines! * 1000) / posted.ms!);

          const dir = join(ctx.tmpDir, `spool-${batch}-${round}`);
          const { status, ms } = await fwd.run({ file, url: server.url, batch, concurrency: DEFAULT_HTTP_CONCURRENCY, dir });
          const end = await server.lines();
          const posts = end.posts - afterRaw.posts;
          // A body of one record carries no newline: each POST is a line.
          const got = batch === 1 ? posts : end.lines - afterRaw.lines;
          if (status !== 0 || got < count) throw new Error(`forward exited ${status}; the server counted ${got} of ${count} lines`);
          rates.push((count * 1000) / ms!);
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
      raw.stop();
      fwd.stop();
      server.stop();
    }
  },
};
