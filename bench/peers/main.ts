/**
 * `npm run bench:peers [-- options]`: ferry against the queues Node users
 * pick today, side by side in one run. USAGE below lists the options
 * (`--help` prints it); any other option is an error, so a mistyped one does
 * not start a full run (which rewrites docs/BENCHMARKS.md).
 *
 * Every run saves its raw samples to docs/benchmarks/samples.json when it
 * writes the document. See docs/BENCHMARKS.md for what each workload does.
 * Before it measures, a run drops the Postgres schemas of earlier runs that
 * were stopped before their cleanup (bench/leftovers.ts).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { BENCH_DIR } from '../harness.js';
import { dropLeftoverSchemas, PEERS_NAME, removeLeftoverDirs } from '../leftovers.js';
import { backlogRun } from './backlog.js';
import { loadAverage, PG_URL } from './common.js';
import type { Report, RunOptions, Sample } from './common.js';
import { gitCommit, machineInfo, writeDocument } from './doc.js';
import type { RunInfo } from './doc.js';
import { embeddedRun, EMBEDDED_SYSTEMS } from './embedded.js';
import { stopNatsCluster } from './ferry-nats.js';
import { jobQueueRun } from './job-queue.js';
import { keyFifoRun } from './key-fifo.js';
import { aggregate, printRows } from './report.js';
import { JOB_SYSTEMS } from './systems.js';

const WORKLOADS = ['jobqueue', 'backlog', 'keyfifo', 'embedded'];
const USAGE = `usage: npm run bench:peers [-- options] [workload…]
  --rounds N     rounds per workload (default 3, at least 1); within a round
                 the systems run one after another, A/B/A/B, each on a
                 fresh schema, file, directory or Redis prefix
  --quick        small sizes (5,000 messages, 100 keys, backlog 50,000)
  --backlog N    pending jobs in the deep-backlog workload (default 1,000,000)
  --json         one JSON object per row on stdout
  --write-doc    write docs/BENCHMARKS.md and docs/benchmarks/*.svg (a full
                 run, without --quick and without a workload filter, always does)
  --systems A,B  only these systems (names as in the table, e.g. "pg-boss,ferry postgres")
  --from FILE    skip measuring; rebuild the output (and the document) from
                 the samples a previous run saved in FILE
  --help         print this and run nothing
  workload…      any of ${WORKLOADS.join(', ')} (default: all)
`;
const SWITCHES = ['--quick', '--json', '--write-doc', '--help', '-h'];
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

function parseArgs(argv: string[]): RunOptions & { writeDoc: boolean; from?: string; systems?: string[] } {
  const value = (flag: string) => {
    const i = argv.indexOf(flag);
    if (i < 0) return undefined;
    const v = argv[i + 1];
    if (v === undefined) throw new Error(`${flag} needs a value`);
    argv.splice(i, 2);
    return v;
  };
  const rounds = Number(value('--rounds') ?? 3);
  const backlogArg = value('--backlog');
  const from = value('--from');
  const systems = value('--systems')?.split(',').map((x) => x.trim());
  const unknown = argv.filter((a) => a.startsWith('-') && !SWITCHES.includes(a));
  if (unknown.length) throw new Error(`unknown option ${unknown.join(', ')} (try --help)`);
  const quick = argv.includes('--quick');
  const json = argv.includes('--json');
  const writeDoc = argv.includes('--write-doc');
  const workloads = argv.filter((a) => !a.startsWith('-'));
  const known = [...JOB_SYSTEMS, ...EMBEDDED_SYSTEMS].map((x) => x.name);
  for (const name of systems ?? []) if (!known.includes(name)) throw new Error(`unknown system ${name} (known: ${known.join(', ')})`);
  for (const w of workloads) if (!WORKLOADS.includes(w)) throw new Error(`unknown workload ${w} (known: ${WORKLOADS.join(', ')})`);
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error('--rounds must be a positive integer');
  const backlog = Number(backlogArg ?? (quick ? 50_000 : 1_000_000));
  if (!Number.isInteger(backlog) || backlog < 1) throw new Error('--backlog must be a positive integer');
  return {
    rounds,
    quick,
    json,
    backlog,
    messages: quick ? 5_000 : 50_000,
    workloads: workloads.length ? workloads : WORKLOADS,
    writeDoc: writeDoc || (!quick && workloads.length === 0 && from === undefined && systems === undefined),
    systems,
    from,
  };
}

/**
 * Drops the schemas and scratch directories of stopped runs
 * (bench/leftovers.ts); a server that cannot be reached is left to the
 * workloads to report.
 */
async function dropPeerLeftovers(): Promise<void> {
  removeLeftoverDirs(BENCH_DIR);
  const admin = new pg.Client({ connectionString: PG_URL });
  try {
    await admin.connect();
    await dropLeftoverSchemas(admin, PEERS_NAME);
  } catch (err) {
    log(`leftover schemas not checked: ${(err as Error).message}\n`);
  } finally {
    await admin.end().catch(() => undefined);
  }
}

if (process.argv.includes('--help') || process.argv.includes('-h')) {
  process.stdout.write(USAGE);
  process.exit(0);
}
/** The options, or exit 2 with the reason on a bad one (an unknown option or workload, a bad number). */
function optionsOrExit(): ReturnType<typeof parseArgs> {
  try {
    return parseArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`bench:peers: ${(err as Error).message}\n`);
    process.exit(2);
  }
}
const opts = optionsOrExit();
const chosen = <T extends { name: string }>(list: T[]) => list.filter((s) => !opts.systems || opts.systems.includes(s.name));
const log = (s: string) => process.stderr.write(s);
let samples: Sample[] = [];
const startedAt = new Date();
const loadBefore = loadAverage();

if (opts.from) {
  samples = (JSON.parse(readFileSync(opts.from, 'utf8')) as { samples: Sample[] }).samples;
} else {
  await dropPeerLeftovers();
  // Ctrl-C or a kill: exit through process.exit, so the 'exit' hooks stop the NATS cluster's servers.
  for (const [signal, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) process.once(signal, () => process.exit(code));
  try {
    for (const workload of opts.workloads) {
      for (let round = 1; round <= opts.rounds; round++) {
        log(`${workload}: round ${round} of ${opts.rounds}\n`);
        const report: Report = (s) => {
          const full: Sample = { ...s, round, load: loadAverage() };
          samples.push(full);
          log(`  ${s.name.padEnd(28)} ${s.system.padEnd(22)} ${Math.round(s.value).toLocaleString('en-US').padStart(10)} ${s.unit}  load ${full.load[0].toFixed(2)}\n`);
        };
        const each = async (what: string, fn: () => Promise<void>) => {
          try {
            await fn();
          } catch (err) {
            log(`  ${what} failed: ${(err as Error).stack}\n`);
          }
        };
        if (workload === 'jobqueue') {
          for (const processes of [1, 4])
            for (const handlerMs of [0, 1])
              for (const s of chosen(JOB_SYSTEMS)) await each(`${s.name} p${processes} ${handlerMs}ms`, () => jobQueueRun(s, processes, handlerMs, opts, report));
        } else if (workload === 'backlog') {
          for (const s of chosen(JOB_SYSTEMS).filter((x) => x.fills !== false)) await each(`${s.name} backlog`, () => backlogRun(s, opts, report));
        } else if (workload === 'keyfifo') {
          for (const order of ['keymajor', 'interleaved'] as const)
            for (const s of chosen(JOB_SYSTEMS).filter((x) => x.keyed)) await each(`${s.name} ${order}`, () => keyFifoRun(s, order, opts, report));
        } else {
          for (const s of chosen(EMBEDDED_SYSTEMS)) await each(s.name, () => embeddedRun(s, opts, report));
        }
      }
    }
  } finally {
    await stopNatsCluster();
  }
}

const rows = aggregate(samples);
printRows(rows, opts.json, (s) => process.stdout.write(s));
if (opts.writeDoc) {
  const dir = join(ROOT, 'docs', 'benchmarks');
  mkdirSync(dir, { recursive: true });
  // A document rebuilt --from saved samples describes the machine they were measured on, not this one.
  const info: RunInfo = opts.from
    ? (JSON.parse(readFileSync(opts.from, 'utf8')) as RunInfo)
    : { opts, startedAt: startedAt.toISOString(), commit: gitCommit(ROOT), loadBefore, loadAfter: loadAverage(), machine: await machineInfo() };
  if (!opts.from) writeFileSync(join(dir, 'samples.json'), JSON.stringify({ ...info, samples }, null, 1) + '\n');
  await writeDocument(ROOT, rows, info);
  log(`wrote docs/BENCHMARKS.md and docs/benchmarks/*.svg\n`);
}
