#!/usr/bin/env node
// Runs every *.test.ts under test/ with node:test through tsx. Node 20 does not
// expand globs itself, so the files are listed here. Extra arguments (file
// paths or a folder) narrow the run.
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

function collect(path, out) {
  const st = statSync(path);
  if (st.isFile()) {
    if (path.endsWith('.test.ts')) out.push(path);
    return out;
  }
  for (const name of readdirSync(path).sort()) collect(join(path, name), out);
  return out;
}

const roots = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const flags = process.argv.slice(2).filter((a) => a.startsWith('-'));
const files = (roots.length ? roots : ['test']).flatMap((r) => collect(r, []));
// Fuzz files run in CI too, with the short run count their default gives
// (`npm run test:long` sets FERRY_LONG=1 for the full counts).
//
// --test-timeout: a test that sets no timeout of its own is failed after 10
// minutes, as hung (the slowest take about a minute on a loaded machine).
// --test-force-exit: a test file's process exits once its tests are done,
// even if a failed test left a handle open; test/helpers/children.ts kills
// the children a test spawned when it ends and on that exit.
const res = spawnSync(
  process.execPath,
  [
    '--import', 'tsx', '--import', fileURLToPath(new URL('./test-child.mjs', import.meta.url)), '--test', '--test-concurrency=2', '--test-timeout=600000', '--test-force-exit',
    // TAP on stdout as before; the slowest files, from scripts/file-times.mjs, on stderr at the end.
    '--test-reporter=tap', '--test-reporter-destination=stdout',
    `--test-reporter=${fileURLToPath(new URL('./file-times.mjs', import.meta.url))}`, '--test-reporter-destination=stderr',
    ...flags, ...files,
  ],
  { stdio: 'inherit' },
);
process.exit(res.status ?? 1);
