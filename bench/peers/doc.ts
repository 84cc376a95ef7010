/**
 * Writes docs/BENCHMARKS.md and one SVG chart per workload
 * (docs/benchmarks/<workload>.svg), rendered in Node by vega + vega-lite with
 * no native dependency. Everything in the document comes from the run: the
 * machine, the versions, each system's settings, the rows and the charts.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem, release } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Redis } from 'ioredis';
import * as vega from 'vega';
import { compile } from 'vega-lite';
import type { TopLevelSpec } from 'vega-lite';
import { PG_URL, REDIS_URL } from './common.js';
import type { RunOptions } from './common.js';
import { EMBEDDED_SYSTEMS } from './embedded.js';
import { packageVersion } from './job-system.js';
import { baselineOf, fmt } from './report.js';
import type { Row } from './report.js';
import { JOB_SYSTEMS } from './systems.js';

export interface RunInfo {
  opts: RunOptions;
  startedAt: string;
  loadBefore: number[];
  loadAfter: number[];
  /** The commit measured (samples saved before it was recorded lack it: the current one is shown). */
  commit?: string;
  /** The machine measured on (samples saved before it was recorded lack it: the current one is shown). */
  machine?: MachineInfo;
}

/** What the document says of the machine and its servers. */
export interface MachineInfo {
  cpu: string;
  cores: number;
  memoryGiB: number;
  kernel: string;
  node: string;
  postgres: string;
  /**
   * The PostgreSQL settings that move every Postgres row (autovacuum above
   * all: with it off, a claim steps over the index entries of every row
   * claimed since the last VACUUM); absent in samples saved before it was
   * recorded.
   */
  postgresSettings?: string;
  redis: string;
}

/** This machine's facts, and the versions of the PostgreSQL and Redis servers the run uses. */
export async function machineInfo(): Promise<MachineInfo> {
  const cpu = cpus();
  return {
    cpu: cpu[0]?.model ?? 'unknown',
    cores: cpu.length,
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    kernel: release(),
    node: process.version,
    ...(await serverVersions()),
  };
}

const WORKLOADS: Array<{ id: string; title: string; text: string }> = [
  {
    id: 'jobqueue',
    title: '1. Job queue on Postgres',
    text:
      'Each system on a fresh schema (BullMQ: a fresh Redis prefix). `jobqueue.publish`: N × 1 KiB published from one process in batches of 100 with ' +
      'no consumer running. `jobqueue.pX.H.consume`: then X consumer processes (concurrency 16 each) start, and the figure is N over the time until ' +
      'the last handler returned; H is a no-op handler or one that waits 1 ms. `jobqueue.pX.H.live`: with the consumers still running, N/5 more are ' +
      'published in batches of 100 with at most 1,024 unhandled at once; msgs/s, and publish-to-handler latency (p50_ms, p99_ms).',
  },
  {
    id: 'backlog',
    title: '2. Deep backlog',
    text:
      'Each system gets B pending 1 KiB jobs through its own bulk path (ferry: SQL into its tables; graphile-worker: its `add_jobs` over ' +
      '`generate_series`; pg-boss: `insert` in chunks of 5,000; BullMQ: `addBulk` in chunks of 1,000). The Postgres server is then settled alike for every ' +
      'system (`VACUUM ANALYZE` of the database, then `CHECKPOINT`), as autovacuum and the checkpointer would settle it after a bulk load. Then one consumer process (concurrency 16, ' +
      'no-op handler) handles the first N. `of_empty` is that figure over the same system\'s `jobqueue.p1.noop.consume` (empty table).',
  },
  {
    id: 'keyfifo',
    title: '3. Per-key FIFO',
    text:
      '1,000 keys × 50 messages (1 KiB; 100 keys with `--quick`), published key-major (all of one key, then the next) or interleaved (message 0 of every key, then message 1, …); ' +
      'the first attempt of key k0\'s first message fails. One consumer process, concurrency 16, no-op handler. The figure is msgs/s over the ' +
      'messages of the other keys, to the last of them: it drops if they stall behind k0. A dash: the other keys had not all been handled 45 s after the ' +
      'consumer started (stalled or only slow; `unfinished` says how many messages were left). `all_s` is the time until k0 finished too (its retry delay included); ' +
      '`order_violations` counts handlers that ran a message of a key before the previous message of that key had succeeded. ' +
      'ferry: message `key`; pg-boss: the `key_strict_fifo` queue policy with the key as `singletonKey`; graphile-worker: one named queue per key. ' +
      'BullMQ has per-key order only in BullMQ Pro (groups) and is left out.',
  },
  {
    id: 'embedded',
    title: '4. Embedded durable queue',
    text:
      'One process, on a fresh directory, each publish durable at the system\'s setting before it returns. `publish.p1`: one publisher, one message per ' +
      'call, timed after as many untimed ones (a process\'s first publishes also pay for compiling its publish path; `cold_msgs_s` is the untimed ones\' rate); `publish.p64`: 64 concurrent single-message publishers (not for plainjob, whose API is synchronous); `publish.batch100`: 100 per call; ' +
      '`consume`: everything published, consumed with concurrency 16 (the DiskQueue: 16 readers, each `reserve` + `ack` per record; the spool, ' +
      'which has one head and one consumer: `popBatch(100)` + `commitBatch`, its cursor fdatasynced per commit). ' +
      'The DiskQueue\'s other consuming paths have rows of their own, each on a fresh directory holding as many messages: ' +
      '`consume.reserve_batch` (16 readers, `reserveBatch(100)` + `ackBatch`), `consume.take_batch` (16 readers, `takeBatch(100)`, at most once per batch) ' +
      'and `consume.serial_drain` (one `drain()` loop: the serial at-most-once path, one commit and so one fdatasync per record); ' +
      'the spool\'s `consume.serial_pop` is its one-at-a-time loop, `pop` + `commit` per record. ' +
      'These rows\' ratios are to ferry `sqlite`\'s `consume`. Ratios are to ferry `sqlite` at synchronous FULL.',
  },
];

async function render(spec: TopLevelSpec): Promise<string> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

function chart(rows: Row[], title: string): TopLevelSpec {
  const values = rows
    .filter((r) => Number.isFinite(r.value))
    .map((r) => ({ row: r.row.replace(/^[a-z]+\./, ''), system: r.system, median: Math.round(r.value), min: Math.round(r.min), max: Math.round(r.max) }));
  const positive = values.map((v) => v.median).filter((v) => v > 0);
  // A log scale when the medians span more than two orders of magnitude, so the small bars stay readable.
  const log = positive.length > 0 && Math.max(...positive) / Math.min(...positive) > 100;
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: { text: title, subtitle: `median msgs/s${log ? ', log scale' : ''}; the black rule spans the range over the rounds` },
    width: Math.min(960, 60 + 16 * new Set(values.map((v) => v.row)).size * new Set(values.map((v) => v.system)).size),
    height: 260,
    background: 'white',
    data: { values },
    encoding: {
      x: { field: 'row', type: 'nominal', title: null, axis: { labelAngle: -30 }, sort: null },
      xOffset: { field: 'system', sort: null },
      color: { field: 'system', type: 'nominal', sort: null, legend: { orient: 'bottom', title: null, columns: 3 } },
    },
    layer: [
      { mark: 'bar', encoding: { y: { field: 'median', type: 'quantitative', title: log ? 'msgs/s (log scale)' : 'msgs/s', scale: log ? { type: 'symlog' } : {}, axis: log ? { values: [0, 10, 100, 1000, 10_000, 100_000, 1_000_000], format: ',d' } : {} } } },
      { mark: { type: 'rule', strokeWidth: 1.5 }, encoding: { y: { field: 'min', type: 'quantitative', scale: log ? { type: 'symlog' } : {} }, y2: { field: 'max' }, color: { value: 'black' } } },
    ],
  } as TopLevelSpec;
}

/** The short guarantee note a table row carries: per-key order notes only on the per-key rows. */
function caveatOf(system: string, workload: string, row: string): string {
  const s = [...JOB_SYSTEMS, ...EMBEDDED_SYSTEMS].find((x) => x.name === system);
  if (!s) return '';
  const onRow = 'rowDiffers' in s && s.rowDiffers?.[row] ? [s.rowDiffers[row]] : [];
  return [...s.differs, ...onRow, ...(workload === 'keyfifo' && 'keyOrder' in s && s.keyOrder ? [s.keyOrder] : [])].join('; ');
}

function table(rows: Row[], workload: string): string {
  const extraKeys = [...new Set(rows.flatMap((r) => Object.keys(r.extra ?? {})))].filter((k) => k !== 'messages' && k !== 'keys');
  const head = ['row', 'system', 'median', 'range (min–max)', 'vs ferry', ...extraKeys, 'load1 (min–max)', 'guarantees that differ'];
  const lines = [`| ${head.join(' | ')} |`, `| ${head.map((h, i) => (i >= 2 && i < head.length - 2 ? '---:' : '---')).join(' | ')} |`];
  for (const r of rows) {
    const extras = extraKeys.map((k) => fmt(r.extra?.[k]));
    const ratio = r.system === baselineOf(r.row) ? 'baseline' : r.ratio !== undefined ? `${r.ratio.toFixed(2)}×` : '–';
    lines.push(
      `| ${[r.row.replace(`${workload}.`, ''), r.system, Number.isFinite(r.value) ? `${fmt(r.value)} ${r.unit}` : '–', Number.isFinite(r.min) ? `${fmt(r.min)}–${fmt(r.max)}` : '–', ratio, ...extras, `${r.load1Range[0].toFixed(1)}–${r.load1Range[1].toFixed(1)}`, caveatOf(r.system, workload, r.row) || '—'].join(' | ')} |`,
    );
  }
  return lines.join('\n');
}

/** The server settings {@link MachineInfo.postgresSettings} names, in this order. */
const PG_SETTINGS = ['autovacuum', 'shared_buffers', 'fsync', 'synchronous_commit'];

async function serverVersions(): Promise<{ postgres: string; postgresSettings?: string; redis: string }> {
  let postgres = 'unreachable';
  let postgresSettings: string | undefined;
  let redis = 'unreachable';
  const pool = new pg.Pool({ connectionString: PG_URL, max: 1 });
  try {
    postgres = (await pool.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version;
    const { rows } = await pool.query<{ name: string; value: string }>(
      'SELECT name, current_setting(name) AS value FROM pg_settings WHERE name = ANY($1::text[])',
      [PG_SETTINGS],
    );
    const byName = new Map(rows.map((r) => [r.name, r.value]));
    postgresSettings = PG_SETTINGS.map((n) => `${n} ${byName.get(n) ?? 'unknown'}`).join(', ');
  } catch {
    /* left as unreachable */
  } finally {
    await pool.end();
  }
  const r = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await r.connect();
    redis = /redis_version:(\S+)/.exec(await r.info('server'))?.[1] ?? 'unknown';
  } catch {
    /* left as unreachable */
  } finally {
    r.disconnect();
  }
  return { postgres, postgresSettings, redis };
}

export function gitCommit(root: string): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
  } catch {
    return 'unknown';
  }
}

function goals(rows: Row[]): string[] {
  const get = (row: string, system: string) => rows.find((r) => r.row === row && r.system === system)?.value ?? NaN;
  const out: string[] = [];
  const ratio = (a: number, b: number) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? `${(a / b).toFixed(2)}×` : 'not measured');
  const f = get('jobqueue.p1.noop.consume', 'ferry postgres');
  out.push(`- ferry \`postgres\` against graphile-worker, one process, no-op handler, consume: ${ratio(f, get('jobqueue.p1.noop.consume', 'graphile-worker'))} (goal: at least 1×).`);
  out.push(`- ferry \`postgres\` against pg-boss, same row: ${ratio(f, get('jobqueue.p1.noop.consume', 'pg-boss'))} (goal: at least 2×).`);
  for (const s of JOB_SYSTEMS) {
    const empty = get('jobqueue.p1.noop.consume', s.name);
    const deep = get('backlog.consume', s.name);
    if (Number.isFinite(deep)) out.push(`- ${s.name}, deep backlog against empty table: ${ratio(deep, empty)}${s.name === 'ferry postgres' ? ' (goal: at least 0.50×)' : ''}.`);
  }
  out.push('  (The deep-backlog and empty-table figures come from different workloads, so from different moments of the run and different loads.)');
  out.push(`- ferry \`sqlite\` batched publish against plainjob at FULL: ${ratio(get('embedded.publish.batch100', 'ferry sqlite'), get('embedded.publish.batch100', 'plainjob FULL'))}; consume: ${ratio(get('embedded.consume', 'ferry sqlite'), get('embedded.consume', 'plainjob FULL'))} (goal: at least 1× on both).`);
  out.push(`- ferry \`sqlite\` 64 concurrent publishers against one: ${ratio(get('embedded.publish.p64', 'ferry sqlite'), get('embedded.publish.p1', 'ferry sqlite'))} (goal: at least 10×, with group commit).`);
  return out;
}

export async function writeDocument(root: string, rows: Row[], info: RunInfo): Promise<void> {
  const machine = info.machine ?? (await machineInfo());
  const { postgres, redis } = machine;
  const doc: string[] = [];
  doc.push('# Benchmarks: ferry and the queues Node users pick today');
  doc.push('');
  doc.push(`Generated by \`npm run bench:peers\` (bench/peers/) on ${info.startedAt.slice(0, 16).replace('T', ' ')} UTC; do not edit by hand, re-run the script. ` +
    `${info.opts.rounds} rounds per workload${info.opts.quick ? ', **quick sizes** (`--quick`)' : ''}; ${info.opts.messages.toLocaleString('en-US')} messages per job-queue run, backlog ${info.opts.backlog.toLocaleString('en-US')}. ` +
    'Within a round the systems run one after another (A/B/A/B), each on a fresh schema, file, directory or Redis prefix. ' +
    'Each table gives the median over the rounds, the range, and the ratio to ferry\'s median on the same row, beside the 1-minute load average seen while the row was measured. ' +
    'Raw samples: [benchmarks/samples.json](benchmarks/samples.json).');
  doc.push('');
  doc.push('## Machine');
  doc.push('');
  doc.push(`- CPU: ${machine.cpu}, ${machine.cores} cores; memory ${machine.memoryGiB} GiB; Linux ${machine.kernel}; Node ${machine.node}.`);
  doc.push(`- Load average (1, 5, 15 min) before the run: ${info.loadBefore.map((x) => x.toFixed(2)).join(', ')}; after: ${info.loadAfter.map((x) => x.toFixed(2)).join(', ')}. ` +
    'The machine is shared: a load above the core count means other work ran beside the benchmark, and absolute rates drift; ratios from the same round hold better.');
  doc.push(`- PostgreSQL ${postgres}${machine.postgresSettings ? ` (${machine.postgresSettings})` : ''} and Redis ${redis} on this host, over loopback.`);
  doc.push('');
  doc.push('## Versions');
  doc.push('');
  doc.push('| software | version |');
  doc.push('| --- | --- |');
  doc.push(`| ferry | ${(JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }).version} (commit ${info.commit ?? gitCommit(root)}) |`);
  for (const p of ['pg-boss', 'graphile-worker', 'bullmq', 'ioredis', 'plainjob', 'better-sqlite3', 'pg']) doc.push(`| ${p} | ${packageVersion(p)} |`);
  const sqlite = EMBEDDED_SYSTEMS.filter((s) => s.sqlite).map((s) => `${s.name}: ${s.sqlite!()}`);
  doc.push(`| SQLite (\`select sqlite_version()\`) | ${sqlite.join('; ')} |`);
  doc.push(`| PostgreSQL server | ${postgres} |`);
  doc.push(`| Redis server | ${redis} |`);
  doc.push('');
  doc.push('pg-boss 12 declares Node >= 22.12 in its engines field and vega-lite 6.5 Node 22; pg-boss runs here on Node 20 for everything used, and vega-lite is held at 6.4.3.');
  doc.push('');
  doc.push('## Performance goals, as measured');
  doc.push('');
  doc.push(...goals(rows));
  for (const w of WORKLOADS) {
    const wr = rows.filter((r) => r.row.startsWith(`${w.id}.`));
    if (wr.length === 0) continue;
    const enriched = wr.map((r) => {
      if (w.id !== 'backlog') return r;
      const empty = rows.find((e) => e.row === 'jobqueue.p1.noop.consume' && e.system === r.system)?.value;
      return { ...r, extra: { ...r.extra, of_empty: empty ? r.value / empty : NaN } };
    });
    writeFileSync(join(root, 'docs', 'benchmarks', `${w.id}.svg`), await render(chart(wr, w.title)));
    doc.push('');
    doc.push(`## ${w.title}`);
    doc.push('');
    doc.push(w.text);
    doc.push('');
    doc.push(`![${w.title}](benchmarks/${w.id}.svg)`);
    doc.push('');
    doc.push(table(enriched, w.id));
  }
  // Section 5 comes from another benchmark (`npm run bench -- queue.idle`),
  // not from these rounds: it is kept by hand in its own file and copied in.
  doc.push('');
  doc.push(readFileSync(join(root, 'docs', 'benchmarks', 'many-subscriptions.md'), 'utf8').trimEnd());
  doc.push('');
  doc.push('## Settings');
  doc.push('');
  doc.push('Every setting the harness changes, with the system\'s default beside it. Payloads are 1 KiB (ferry: bytes; the peers: a 1,024-character string in their JSON job data).');
  for (const s of [...JOB_SYSTEMS, ...EMBEDDED_SYSTEMS]) {
    doc.push('');
    doc.push(`### ${s.name}`);
    doc.push('');
    if (s.caveats) doc.push(`Guarantees that differ from ferry's: ${s.caveats}.`, '');
    doc.push('| setting | used | default |');
    doc.push('| --- | --- | --- |');
    for (const x of s.settings) doc.push(`| ${x.setting} | ${x.value} | ${x.default || '—'} |`);
  }
  doc.push('');
  writeFileSync(join(root, 'docs', 'BENCHMARKS.md'), doc.join('\n'));
}
