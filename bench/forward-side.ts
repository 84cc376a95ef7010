/**
 * One side of the forward benchmark (bench/forward.bench.ts), in a process
 * of its own: `raw` is the plain loop of POSTs, `forward` runs `ferry
 * forward` through its function. The two used to share the benchmark's
 * process, where the raw loop on Node's `http` ran slower interleaved with
 * forward than alone: 25–50% with forward on undici (median about 195 ms
 * against 143 ms per 200,000 lines), 7–55% with it on Node's `http` (median
 * about 156 ms), which flattered the ratio of the undici forward. Each side
 * stays up for the whole suite, so both are measured warm.
 *
 * Reads one JSON job per line on stdin, `{ file, url, batch, concurrency,
 * dir }` (`dir` for `forward` only), runs it, and writes one JSON line:
 * `{ lines, ms }` for `raw`, `{ status, ms }` for `forward`.
 */
import * as fs from 'node:fs';
import { Agent, request } from 'node:http';
import { createInterface } from 'node:readline';
import { forward } from '../src/cli/forward.js';

interface Job {
  file: string;
  url: string;
  batch: number;
  concurrency: number;
  dir?: string;
}

/** Raw twin: the file's lines POSTed `batch` to a body, `concurrency` POSTs in flight. */
async function rawPosts(job: Job): Promise<{ lines: number; ms: number }> {
  const start = performance.now();
  const data = fs.readFileSync(job.file);
  const bodies: Buffer[] = [];
  let lines = 0;
  let from = 0;
  for (let n = 0, at = data.indexOf(10); at !== -1; at = data.indexOf(10, at + 1)) {
    lines++;
    if (++n === job.batch) {
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
      const req = request(job.url, { method: 'POST', agent, headers: { 'content-type': 'text/plain', 'content-length': body.length } }, (res) => {
        res.on('end', () => (res.statusCode === 204 ? resolve() : reject(new Error(`HTTP ${res.statusCode}`))));
        res.resume();
      });
      req.on('error', reject);
      req.end(body);
    });
  await Promise.all(
    Array.from({ length: job.concurrency }, async () => {
      while (next < bodies.length) await post(bodies[next++]!);
    }),
  );
  agent.destroy();
  return { lines, ms: performance.now() - start };
}

async function forwardRun(job: Job): Promise<{ status: number; ms: number }> {
  const start = performance.now();
  const status = await forward(job.file, { dir: job.dir!, http: job.url, batch: job.batch, concurrency: job.concurrency, quiet: true });
  return { status, ms: performance.now() - start };
}

const side = process.argv[2];
if (side !== 'raw' && side !== 'forward') throw new Error(`usage: forward-side.ts raw|forward (got ${side})`);
for await (const line of createInterface({ input: process.stdin })) {
  const job = JSON.parse(line) as Job;
  const result = side === 'raw' ? await rawPosts(job) : await forwardRun(job);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
