/**
 * Workload 4's `embedded.publish.p1` row alone, long enough to rank two
 * systems on a noisy machine: `node --import tsx bench/peers/publish-p1.ts
 * [messages] [rounds] [system,system…]` (default 2000 messages, 5 rounds,
 * `ferry sqlite,plainjob FULL`) publishes `messages` one at a time into each
 * system on a fresh directory, the systems taking turns round by round, and
 * prints each round (msgs/s, the process's CPU per publish in µs, the load)
 * and the median of each system with its ratio to the first one. Each
 * instance first publishes 200 messages that are not timed, so the file has
 * its tables' first pages and the JIT is warm.
 *
 * CPU per publish is user + system time of the whole process over the timed
 * publishes: with `synchronous = FULL` it includes the kernel's share of the
 * fsync, so it is the part of a publish that another process's load slows
 * down, beside the wait for the disk.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { BENCH_DIR } from '../harness.js';
import { EMBEDDED_SYSTEMS } from './embedded.js';

const messages = Number(process.argv[2] ?? 2000);
const rounds = Number(process.argv[3] ?? 5);
const names = (process.argv[4] ?? 'ferry sqlite,plainjob FULL').split(',');
const WARM = 200;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const systems = names.map((n) => {
  const s = EMBEDDED_SYSTEMS.find((e) => e.name === n);
  if (s === undefined) throw new Error(`no embedded system ${JSON.stringify(n)} (known: ${EMBEDDED_SYSTEMS.map((e) => e.name).join(', ')})`);
  return s;
});
mkdirSync(BENCH_DIR, { recursive: true });
const rates = new Map<string, number[]>();
const cpus = new Map<string, number[]>();
for (let r = 1; r <= rounds; r++) {
  for (const s of systems) {
    const dir = mkdtempSync(join(BENCH_DIR, `p1-${process.pid}-`));
    const inst = await s.open(dir);
    try {
      for (let i = 0; i < WARM; i++) await inst.publishOne();
      const cpu0 = process.cpuUsage();
      const start = performance.now();
      for (let i = 0; i < messages; i++) await inst.publishOne();
      const rate = (messages * 1000) / (performance.now() - start);
      const cpu = process.cpuUsage(cpu0);
      const cpuUs = (cpu.user + cpu.system) / messages;
      (rates.get(s.name) ?? rates.set(s.name, []).get(s.name)!).push(rate);
      (cpus.get(s.name) ?? cpus.set(s.name, []).get(s.name)!).push(cpuUs);
      process.stdout.write(`round ${r} ${s.name}: ${Math.round(rate)} msgs/s, ${cpuUs.toFixed(0)} µs CPU/publish, load ${loadavg()[0]!.toFixed(2)}\n`);
    } finally {
      await inst.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }
}
const first = median(rates.get(systems[0]!.name)!);
for (const s of systems) {
  const m = median(rates.get(s.name)!);
  process.stdout.write(`${s.name}: median ${Math.round(m)} msgs/s, ${median(cpus.get(s.name)!).toFixed(0)} µs CPU/publish, ${(m / first).toFixed(2)}× of ${systems[0]!.name}\n`);
}
