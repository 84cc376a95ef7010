#!/usr/bin/env node
// `npm run bench:peers`: the benchmark of ferry against other job queues.
// The peers (pg-boss, graphile-worker, BullMQ, plainjob) and the chart
// packages live in bench/peers/package.json with their own lock file, so
// ferry's `npm ci` installs none of them; the first run installs them with
// `npm ci --prefix bench/peers`. Arguments go to bench/peers/main.ts.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const peers = fileURLToPath(new URL('../bench/peers/', import.meta.url));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
if (!existsSync(new URL('node_modules/.package-lock.json', `file://${peers}`))) {
  console.error('bench:peers: installing the peer queues into bench/peers/node_modules (first run)');
  const ci = spawnSync(npm, ['ci', '--prefix', peers, '--no-audit', '--no-fund'], { stdio: 'inherit' });
  if (ci.status !== 0) process.exit(ci.status ?? 1);
}
// The run is a child: a SIGINT or SIGTERM sent to this process alone (a
// `timeout`, a process manager) is passed on, so the run stops its own
// children (the NATS cluster) and leaves docs/BENCHMARKS.md as it was.
const child = spawn(process.execPath, ['--import', 'tsx', `${peers}main.ts`, ...process.argv.slice(2)], { stdio: 'inherit' });
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal === 'SIGTERM' ? 143 : signal === 'SIGINT' ? 130 : 1)));
