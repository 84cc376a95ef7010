#!/usr/bin/env node
// `npm start`: ferry's main job on real input, with the built CLI.
//
//   node scripts/demo.mjs [FILE...]
//
// Without arguments the input is every readable text file under /var/log
// (falling back to /etc/*.conf, then to this repository's scripts, so there is
// always something). The files are snapshotted into one input file (a
// newline is added to a file whose last line lacks one), pushed line by line
// into a fresh queue with `ferry push`, checked with `ferry verify`, then
// drained with `ferry drain --exec-batch` into an output file. The output must
// equal the snapshot byte for byte; any difference, or any failed step, exits
// non-zero. The temporary directory is removed either way.
import { spawnSync } from 'node:child_process';
import { closeSync, lstatSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'dist', 'cli', 'main.js');
/** Input is capped so the demo stays well under a minute on a slow disk. */
const MAX_INPUT_BYTES = 64 * 1024 * 1024;
/** Records per `--exec` process while draining. */
const EXEC_BATCH = 5000;
const SNIFF_BYTES = 8192;

/** A regular file we can read whose first bytes hold no NUL (binary logs like wtmp or the journal do). */
function readableText(path) {
  let st;
  try {
    st = lstatSync(path);
  } catch {
    return undefined;
  }
  if (!st.isFile() || st.size === 0) return undefined;
  let fd;
  try {
    fd = openSync(path, 'r');
    const head = Buffer.alloc(Math.min(SNIFF_BYTES, st.size));
    const n = readSync(fd, head, 0, head.length, 0);
    return head.subarray(0, n).includes(0) ? undefined : st.size;
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function walk(dir, out) {
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return out;
  }
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    const path = join(dir, e.name);
    if (e.isDirectory()) walk(path, out);
    else if (e.isFile()) out.push(path);
  }
  return out;
}

function textFiles(paths) {
  return paths.map((path) => ({ path, size: readableText(path) })).filter((f) => f.size !== undefined);
}

function defaultInputs() {
  let files = textFiles(walk('/var/log', []));
  if (files.length > 0) return { source: '/var/log', files };
  let etc = [];
  try {
    etc = readdirSync('/etc').filter((n) => n.endsWith('.conf')).map((n) => join('/etc', n));
  } catch {
    // no /etc: fall through
  }
  files = textFiles(etc);
  if (files.length > 0) return { source: '/etc/*.conf', files };
  return { source: 'scripts/', files: textFiles(walk(join(root, 'scripts'), [])) };
}

/** Copies the inputs into one file, newline-terminating each; returns lines and bytes. */
function snapshot(files, out) {
  const fd = openSync(out, 'w');
  let bytes = 0;
  let lines = 0;
  let used = 0;
  let skipped = 0;
  try {
    for (const f of files) {
      if (bytes + f.size + 1 > MAX_INPUT_BYTES) {
        skipped++;
        continue;
      }
      let data;
      try {
        data = readFileSync(f.path);
      } catch {
        skipped++;
        continue;
      }
      if (data.length === 0) continue;
      if (bytes + data.length + 1 > MAX_INPUT_BYTES) {
        // it grew since it was listed
        skipped++;
        continue;
      }
      if (data[data.length - 1] !== 0x0a) data = Buffer.concat([data, Buffer.from('\n')]);
      writeSync(fd, data);
      bytes += data.length;
      used++;
      for (let i = data.indexOf(0x0a); i >= 0; i = data.indexOf(0x0a, i + 1)) lines++;
    }
  } finally {
    closeSync(fd);
  }
  return { bytes, lines, used, skipped };
}

/** Runs the built CLI; stderr (bars, summaries) goes to ours. Returns stdout and seconds taken. */
function ferry(args, env = {}) {
  const t0 = performance.now();
  const res = spawnSync(process.execPath, [cli, ...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...env },
    maxBuffer: 64 * 1024 * 1024,
  });
  const seconds = (performance.now() - t0) / 1000;
  if (res.error) throw new Error(`ferry ${args[0]}: ${res.error.message}`);
  if (res.status !== 0) {
    process.stdout.write(res.stdout);
    throw new Error(`ferry ${args[0]} exited with status ${res.status}`);
  }
  return { stdout: res.stdout.toString(), seconds };
}

/** Offset of the first difference between two files, or -1 when they are equal. */
function firstDifference(a, b) {
  const fa = openSync(a, 'r');
  const fb = openSync(b, 'r');
  const ba = Buffer.alloc(1 << 20);
  const bb = Buffer.alloc(1 << 20);
  try {
    for (let pos = 0; ; ) {
      const na = readSync(fa, ba, 0, ba.length, pos);
      const nb = readSync(fb, bb, 0, bb.length, pos);
      const n = Math.min(na, nb);
      for (let i = 0; i < n; i++) if (ba[i] !== bb[i]) return pos + i;
      if (na !== nb) return pos + n;
      if (na === 0) return -1;
      pos += n;
    }
  } finally {
    closeSync(fa);
    closeSync(fb);
  }
}

const rate = (records, seconds) => `${Math.round(records / seconds)} records/s`;
const mib = (n) => `${(n / 1048576).toFixed(1)} MiB`;

function main() {
  const args = process.argv.slice(2);
  const { source, files } = args.length > 0
    ? { source: 'arguments', files: args.map((path) => ({ path, size: readableText(path) ?? 0 })) }
    : defaultInputs();
  const work = mkdtempSync(join(tmpdir(), 'ferry-demo-'));
  try {
    const input = join(work, 'input.txt');
    const output = join(work, 'output.txt');
    const queue = join(work, 'queue');
    const snap = snapshot(files, input);
    console.log(`ferry demo: ${snap.used} files from ${source}, ${snap.lines} lines, ${mib(snap.bytes)}` +
      (snap.skipped ? ` (${snap.skipped} skipped: unreadable or over the ${mib(MAX_INPUT_BYTES)} cap)` : ''));
    if (snap.lines === 0) throw new Error('no input lines found');

    const pushed = ferry(['push', queue, input]);
    const before = JSON.parse(ferry(['stats', queue, '--json']).stdout);
    if (before.backlog !== snap.lines) throw new Error(`queue holds ${before.backlog} records, expected ${snap.lines}`);
    const checked = JSON.parse(ferry(['verify', queue, '--json']).stdout);

    const drained = ferry(['drain', queue, '--exec', 'cat >> "$FERRY_DEMO_OUT"', '--exec-batch', String(EXEC_BATCH)], {
      FERRY_DEMO_OUT: output,
    });
    const after = JSON.parse(ferry(['stats', queue, '--json']).stdout);

    const diff = firstDifference(input, output);
    console.log(`push : ${snap.lines} records in ${pushed.seconds.toFixed(2)} s, ${rate(snap.lines, pushed.seconds)} (durable batches, process start included)`);
    console.log(`drain: ${snap.lines} records in ${drained.seconds.toFixed(2)} s, ${rate(snap.lines, drained.seconds)} (--exec-batch ${EXEC_BATCH})`);
    console.log(`verify after push: ${checked.ok ? 'ok' : 'DAMAGED'}, ${checked.segments} segments, ${checked.records} records`);
    console.log(`stats after push : backlog ${before.backlog}, backlogBytes ${before.backlogBytes}, segments ${before.segments}, diskBytes ${before.diskBytes}`);
    console.log(`stats after drain: backlog ${after.backlog}, backlogBytes ${after.backlogBytes}, segments ${after.segments}, corruptions ${after.corruptions}`);
    if (!checked.ok) throw new Error('verify found damage in a freshly written queue');
    if (after.backlog !== 0) throw new Error(`${after.backlog} records left after the drain`);
    if (diff >= 0) throw new Error(`output differs from input at byte ${diff}`);
    console.log(`output is byte-identical to the input (${snap.bytes} bytes)`);
    return 0;
  } catch (err) {
    console.error(`ferry demo FAILED: ${err.message}`);
    return 1;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

process.exitCode = main();
