/**
 * `npm run bench [-- [--json] [--quick] [filter…]]`: runs every suite whose
 * name starts with one of the filters (all when none) and prints a table, or
 * one JSON object per line with `--json`. `--help` lists the suites and runs
 * nothing; any other option is an error (exit 2), so a mistyped one does not
 * start the whole bench.
 */
import { mkdtempSync, mkdirSync, rmSync, readdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BENCH_DIR } from './harness.js';
import type { BenchResult, BenchSuite } from './harness.js';
import { removeLeftoverDirs } from './leftovers.js';

const OPTIONS = ['--json', '--quick', '--help', '-h'];
const args = process.argv.slice(2);
const unknown = args.filter((a) => a.startsWith('-') && !OPTIONS.includes(a));
if (unknown.length) {
  process.stderr.write(`bench: unknown option ${unknown.join(', ')} (try --help)\n`);
  process.exit(2);
}
const json = args.includes('--json');
const quick = args.includes('--quick');
const help = args.includes('--help') || args.includes('-h');
const filters = args.filter((a) => !a.startsWith('-'));

const here = dirname(fileURLToPath(import.meta.url));
const files = readdirSync(here).filter((f) => f.endsWith('.bench.ts')).sort();
const rows: BenchResult[] = [];

function fmt(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return '';
  if (Math.abs(n) >= 100) return Math.round(n).toLocaleString('en-US');
  return n.toPrecision(3);
}

function print(r: BenchResult): void {
  if (json) {
    process.stdout.write(JSON.stringify(r) + '\n');
    return;
  }
  const extra = r.extra ? Object.entries(r.extra).map(([k, v]) => `${k}=${fmt(v)}`).join(' ') : '';
  process.stdout.write(
    `${r.name.padEnd(36)} ${fmt(r.value).padStart(14)} ${r.unit.padEnd(7)} ` +
      `${r.baseline !== undefined ? fmt(r.baseline).padStart(14) : ''.padStart(14)} ` +
      `${r.ratio !== undefined ? r.ratio.toFixed(2).padStart(6) : ''.padStart(6)}  ${extra}\n`,
  );
}

if (help) {
  const names = new Set<string>();
  for (const f of files) names.add(((await import(join(here, f))) as { suite: BenchSuite }).suite.name);
  process.stdout.write(
    'usage: npm run bench [-- [--json] [--quick] [filter…]]\n' +
      '  filter   run the suites (and report the rows) whose name starts with it; all when none\n' +
      '  --json   one JSON object per row: { name, unit, value, baseline?, ratio?, extra? }\n' +
      '  --quick  smaller sizes (a tenth)\n' +
      `suites: ${[...names].join(', ')}\n`,
  );
  process.exit(0);
}

if (!json) process.stdout.write(`${'name'.padEnd(36)} ${'value'.padStart(14)} ${'unit'.padEnd(7)} ${'baseline'.padStart(14)} ${'ratio'.padStart(6)}\n`);
// Scratch directories of runs that were stopped before their cleanup (bench/leftovers.ts).
removeLeftoverDirs(BENCH_DIR);
mkdirSync(BENCH_DIR, { recursive: true });
for (const f of files) {
  const { suite } = (await import(join(here, f))) as { suite: BenchSuite };
  if (filters.length && !filters.some((p) => suite.name.startsWith(p) || p.startsWith(suite.name))) continue;
  const tmpDir = mkdtempSync(join(BENCH_DIR, `${suite.name}-${process.pid}-`));
  try {
    await suite.run({
      tmpDir,
      scale: quick ? 0.1 : 1,
      report(r) {
        if (filters.length && !filters.some((p) => r.name.startsWith(p) || suite.name.startsWith(p))) return;
        rows.push(r);
        print(r);
      },
    });
  } finally {
    rmSync(tmpDir, { recursive: true, force: true });
  }
}
