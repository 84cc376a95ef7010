// A node:test reporter that adds up, per test file, the durations of its
// top-level tests and suites, and prints the slowest files when the run ends:
// where a run's time goes, without reading the whole TAP output. Used by
// scripts/test.mjs beside the TAP reporter (to stderr).
import { relative } from 'node:path';

export default async function* fileTimes(source) {
  const perFile = new Map();
  for await (const event of source) {
    const { data } = event;
    // The run's closing diagnostics ("tests N" ... "duration_ms N") come last;
    // with --test-force-exit the process may end before the stream does, so
    // the table goes out with the first of them.
    if (event.type === 'test:diagnostic' && data.nesting === 0 && /^tests \d+$/.test(data.message)) {
      yield* table(perFile);
      perFile.clear();
      continue;
    }
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    if (data.nesting !== 0 || !data.file) continue;
    const file = relative(process.cwd(), data.file);
    perFile.set(file, (perFile.get(file) ?? 0) + (data.details?.duration_ms ?? 0));
  }
  if (perFile.size > 0) yield* table(perFile);
}

function* table(perFile) {
  const rows = [...perFile].sort((a, b) => b[1] - a[1]);
  const total = rows.reduce((n, [, ms]) => n + ms, 0);
  yield `# file times: ${rows.length} files, ${(total / 1000).toFixed(0)} s of tests in all (files run 2 at a time); the slowest:\n`;
  for (const [file, ms] of rows.slice(0, 15)) yield `#   ${(ms / 1000).toFixed(1).padStart(7)} s  ${file}\n`;
}
