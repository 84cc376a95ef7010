// A node:test reporter that adds up, per test file, the durations of its
// top-level tests and suites, and prints the slowest files when the run ends:
// where a run's time goes, without reading the whole TAP output. Used by
// scripts/test.mjs beside the TAP reporter (to stderr).
//
// It also counts, per file, the tests that started and the verdicts that
// came back. A file's process that ends before its report reached the runner
// (an exit in the middle of a test, or a report cut off in the pipe: see
// scripts/test-child.mjs) loses the verdicts of its last tests without
// failing anything; the runner then prints a smaller count and exits 0. Any
// test started without a verdict is listed here and fails the run.
import { relative } from 'node:path';

export default async function* fileTimes(source) {
  const perFile = new Map();
  /** Per file: names of tests started and not yet given a verdict, with how many of each. */
  const open = new Map();
  const key = (data) => `${data.nesting}\u0000${data.name}`;
  for await (const event of source) {
    const { data } = event;
    if (data?.file && (event.type === 'test:start' || event.type === 'test:pass' || event.type === 'test:fail')) {
      const file = relative(process.cwd(), data.file);
      let names = open.get(file);
      if (!names) open.set(file, (names = new Map()));
      const k = key(data);
      const n = (names.get(k) ?? 0) + (event.type === 'test:start' ? 1 : -1);
      if (n === 0) names.delete(k);
      else names.set(k, n);
    }
    // The run's closing diagnostics ("tests N" ... "duration_ms N") come last;
    // with --test-force-exit the process may end before the stream does, so
    // the table goes out with the first of them.
    if (event.type === 'test:diagnostic' && data.nesting === 0 && /^tests \d+$/.test(data.message)) {
      yield* table(perFile);
      perFile.clear();
      yield* lostVerdicts(open);
      open.clear();
      continue;
    }
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    if (data.nesting !== 0 || !data.file) continue;
    const file = relative(process.cwd(), data.file);
    perFile.set(file, (perFile.get(file) ?? 0) + (data.details?.duration_ms ?? 0));
  }
  if (perFile.size > 0) yield* table(perFile);
  yield* lostVerdicts(open);
}

function* lostVerdicts(open) {
  const lost = [...open].flatMap(([file, names]) => [...names].filter(([, n]) => n > 0).map(([k]) => `${file}: ${k.split('\u0000')[1]}`));
  if (lost.length > 0) {
    yield `# verdicts lost: ${lost.length} test(s) started and never reported passing or failing; the run fails:\n`;
    for (const l of lost.slice(0, 20)) yield `#   ${l}\n`;
    process.exitCode = 1;
  }
}

function* table(perFile) {
  const rows = [...perFile].sort((a, b) => b[1] - a[1]);
  const total = rows.reduce((n, [, ms]) => n + ms, 0);
  yield `# file times: ${rows.length} files, ${(total / 1000).toFixed(0)} s of tests in all (files run 2 at a time); the slowest:\n`;
  for (const [file, ms] of rows.slice(0, 15)) yield `#   ${(ms / 1000).toFixed(1).padStart(7)} s  ${file}\n`;
}
